"""Define-by-run loop-level IR with SymPy shapes: lowerings, scheduling and fusion, memory planning, wrapper code."""

from inductor_ir._version import __version__

__all__ = ["__version__"]
