"""The version of this distribution, single-sourced for hatch."""

__version__ = "0.7.0"
