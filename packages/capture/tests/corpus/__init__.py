"""Kiln's capture coverage corpus: small PyTorch programs, grouped by the Python feature they exercise.

Every module registers its programs into `PROGRAMS` on import (see `_registry.py`); importing this package
imports them all. `reference.json` beside it holds TorchDynamo's graph and break counts per program, made by
`tools/corpus_reference.py`. How to add a program: docs/capture-corpus.md.
"""

from __future__ import annotations

from . import (
    autograd_features,
    calls,
    classes,
    closures,
    comprehensions,
    containers,
    data_dependent,
    exceptions,
    generators,
    grad_modes,
    guards,
    indexing,
    iterators,
    language,
    linalg,
    mathconst,
    model_patterns,
    mutation,
    nn_containers,
    nn_state,
    pointwise,
    records,
    reductions,
    reflection,
    scalars,
    semantics,
    side_effects,
    sizes,
    strings,
    tricky,
    views,
)
from ._registry import PROGRAMS, Program

FEATURE_MODULES = (
    autograd_features,
    calls,
    classes,
    closures,
    comprehensions,
    containers,
    data_dependent,
    exceptions,
    generators,
    grad_modes,
    guards,
    indexing,
    iterators,
    language,
    linalg,
    mathconst,
    model_patterns,
    mutation,
    nn_containers,
    nn_state,
    pointwise,
    records,
    reductions,
    reflection,
    scalars,
    semantics,
    side_effects,
    sizes,
    strings,
    tricky,
    views,
)

__all__ = ["FEATURE_MODULES", "PROGRAMS", "Program"]
