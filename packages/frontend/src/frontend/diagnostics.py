"""What happens around each graph's compile besides compiling: progress line, repro scripts, report.

`watched_graph` wraps one backend call (see `frontend.api.BoundBackend`): it tells the progress
line a graph started, notes the graph for repro scripts and opens its compile-report entry; if the
backend raises, it writes a repro script and adds its path to the error.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from frontend.context import CompileContext
from frontend.repro.recorder import written_repro


@contextlib.contextmanager
def watched_graph(context: CompileContext, gm: torch.fx.GraphModule, example_inputs: list[Any], backend: str) -> Iterator[None]:
    """Around the backend's compile of `gm` (call after `context.new_artifacts()`)."""
    if context.repro is not None:
        context.repro.note_captured(gm, example_inputs, backend)
    if context.report is not None:
        context.report.begin_graph(context, gm, backend)
    if context.progress is not None:
        context.progress.start_graph(context.graphs_compiled, context.times.graphs)
    try:
        yield
    except Exception as error:
        path = context.repro.write_failure(gm, error) if context.repro is not None else written_repro(error)
        if path is not None and str(path) not in str(error):
            error.add_note(f"[kiln] repro script of the failing graph: {path} (run it with python)")
        if context.report is not None:
            context.report.end_graph(context, error)
        raise
    else:
        if context.report is not None:
            context.report.end_graph(context)
    finally:
        if context.progress is not None:
            context.progress.finish_graph()
