"""A differential fuzzer for the Python around tensor code: capture against CPython (docs/testing.md)."""
