"""Kiln: a just-in-time compiler for PyTorch programs. frontend.compile(model) and the end-user API."""

from frontend._version import __version__

__all__ = ["__version__"]
