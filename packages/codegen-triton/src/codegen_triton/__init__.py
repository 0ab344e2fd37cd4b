"""Triton kernel generator for Kiln's inductor-ir (CUDA devices)."""

from codegen_triton._version import __version__

__all__ = ["__version__"]
