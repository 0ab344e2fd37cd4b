"""The symbolic interpreter: bytecode in, FX graph plus Python state out."""
