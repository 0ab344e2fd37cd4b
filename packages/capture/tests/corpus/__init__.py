"""Kiln's capture coverage corpus: small PyTorch programs, grouped by the Python feature they exercise.

Every module registers its programs into `PROGRAMS` on import (see `_registry.py`); importing this package
imports them all. `reference.json` beside it holds TorchDynamo's graph and break counts per program, made by
`tools/corpus_reference.py`. How to add a program: docs/capture-corpus.md.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._registry import PROGRAMS, Program

# Every public module of this folder is a feature module; importing it registers its programs.
FEATURE_MODULES = tuple(
    importlib.import_module(f"{__name__}.{info.name}")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    if not info.name.startswith("_")
)

__all__ = ["FEATURE_MODULES", "PROGRAMS", "Program"]
