"""The minifier: the smallest subgraph that still fails as the whole graph does, as a repro script.

A graph "fails" as a crash (compiling or running it raises; a candidate must raise the same
innermost exception type) or as an accuracy mismatch (its compiled result differs from eager,
float64 eager breaking ties). `shrink` does the search; this module says what failing means.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from frontend.repro.script import ReproSpec, render_script, write_script
from frontend.repro.shrink import Shrunk, shrink
from frontend.repro.stages import check_accuracy, clone_inputs, compile_stage


def root_cause(error: BaseException) -> BaseException:
    """The innermost exception of `error`'s ``__cause__`` chain (what a wrapper re-raised)."""
    seen = {id(error)}
    while error.__cause__ is not None and id(error.__cause__) not in seen:
        error = error.__cause__
        seen.add(id(error))
    return error


def failure_of(gm: torch.fx.GraphModule, inputs: list[Any], spec: ReproSpec) -> str | None:
    """How `gm` fails under `spec` ("TypeName: message", or a mismatch), or None when it does not."""
    try:
        compiled = compile_stage(gm, inputs, after=spec.after, backend=spec.backend, options=spec.options)
        if spec.kind == "accuracy":
            mismatch = check_accuracy(gm, inputs, compiled)
            return None if mismatch is None else f"mismatch: {mismatch.describe()}"
        compiled(*clone_inputs(inputs))
    except Exception as error:
        if spec.kind == "accuracy":
            return None  # another failure, not the mismatch we look for
        cause = root_cause(error)
        return f"{type(cause).__name__}: {' '.join(str(cause).split())[:200]}"
    return None


def minify(gm: torch.fx.GraphModule, inputs: list[Any], spec: ReproSpec) -> Shrunk:
    """The smallest subgraph of `gm` failing the way `gm` does under `spec`.

    Raises ValueError when `gm` itself does not fail.
    """
    seen = failure_of(gm, inputs, spec)
    if seen is None:
        raise ValueError("the graph does not fail: nothing to minify")
    same = seen.split(":", 1)[0]

    def fails(candidate: torch.fx.GraphModule, candidate_inputs: list[Any]) -> bool:
        found = failure_of(candidate, candidate_inputs, spec)
        return found is not None and found.split(":", 1)[0] == same

    return shrink(gm, inputs, fails)


def write_minified(
    gm: torch.fx.GraphModule, inputs: list[Any], spec: ReproSpec, folder: Path, stem: str, saved_bytes: int
) -> tuple[Path, Shrunk]:
    """Minify `gm` and write the result as a repro script in `folder`; returns its path and the result."""
    shrunk = minify(gm, inputs, spec)
    found = failure_of(shrunk.graph_module, shrunk.inputs, spec) or spec.error
    text = render_script(shrunk.graph_module, shrunk.inputs, ReproSpec(spec.after, spec.backend, spec.kind, spec.options, found), saved_bytes)
    return write_script(folder, stem, text), shrunk
