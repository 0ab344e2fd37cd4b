"""Bytecode capture of PyTorch programs into FX graphs, with guards, graph breaks and resume functions."""

from capture._version import __version__

__all__ = ["__version__"]
