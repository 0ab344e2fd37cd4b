"""Kernel source generation: the Triton ops handler, kernel plans, reductions and the module template."""
