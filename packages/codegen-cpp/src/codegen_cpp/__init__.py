"""C++/OpenMP vectorized kernel generator for Kiln's inductor-ir (CPUs)."""

from codegen_cpp._version import __version__

__all__ = ["__version__"]
