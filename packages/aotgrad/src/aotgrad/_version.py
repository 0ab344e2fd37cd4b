"""The version of this distribution, single-sourced for hatch."""

__version__ = "0.1.0"
