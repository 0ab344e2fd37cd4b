"""capture's user tools, re-exported: explain, export, disable, allow_in_graph, and the rest.

These are capture's own function objects (capture recognizes some of them, such as
`graph_break`, when it meets them inside captured code, so they must not be wrapped). Two are
extended: `reset` also forgets the frontend's compile times, and `run` also accepts what
`frontend.compile` returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import capture
from capture import (
    allow_in_graph,
    disable,
    disallow_in_graph,
    explain,
    export,
    graph_break,
    mark_dynamic,
    mark_static,
)
from frontend.stats import PROCESS_TIMES

__all__ = [
    "allow_in_graph",
    "disable",
    "disallow_in_graph",
    "explain",
    "export",
    "graph_break",
    "mark_dynamic",
    "mark_static",
    "reset",
    "run",
]


def run(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` using only graphs compiled already, never compiling new ones (capture.run).

    `fn` may be what `frontend.compile` returned (a function or an `OptimizedModule`) or the
    original function or module. On a cache miss it runs eagerly.
    """
    original = getattr(fn, "_orig_mod", None) if isinstance(fn, torch.nn.Module) else None
    return capture.run(original if original is not None else fn)  # type: ignore[no-any-return]


def reset() -> None:
    """Forget every compiled graph (capture's code cache) and the frontend's compile times."""
    capture.reset()
    PROCESS_TIMES.reset()
