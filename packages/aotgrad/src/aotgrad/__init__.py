"""Joint forward+backward tracing to functional ATen graphs, min-cut partitioning, autograd runtime wrapper."""

from aotgrad._version import __version__

__all__ = ["__version__"]
