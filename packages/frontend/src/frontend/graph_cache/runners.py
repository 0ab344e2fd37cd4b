"""The inductor backend's compiled graphs as cache records, and back.

A forward or backward graph compiled by the inductor backend reaches aotgrad as a runner: a
first-call guard (`backends/fallback.py`) around a `CompiledGraph` (or the boxed runner that skips
its input checks). `export_runner` unwraps it and saves the `CompiledGraph` through inductor_ir
(`inductor_ir.save_compiled_graph`); a graph that runs eagerly is refused, so only compiled graphs are
cached. `load_runner` loads a saved graph and wraps it the way aotgrad called the original.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import torch.utils._pytree as pytree

import inductor_ir
from aotgrad.plans import NotPlannable

__all__ = ["export_runner", "load_runner"]


def export_runner(runner: Any, backends: Mapping[str, Any]) -> inductor_ir.SavedGraph:
    """The saved form of one compiled graph runner.

    Raises:
        NotPlannable: the runner is not a compiled graph (it runs eagerly, or fell back on its first run).
    """
    runner = getattr(
        runner, "wrapped_runner", runner
    )  # a wrapper adjusting outputs only (backends/inductor.py)
    guarded = getattr(runner, "compiled", None)
    if guarded is not None and hasattr(runner, "_run"):
        if runner._run is not guarded:
            raise NotPlannable("a graph fell back to eager on its first run")
        runner = guarded
    compiled = getattr(runner, "compiled", runner)  # the static runner wraps the CompiledGraph
    if not isinstance(compiled, inductor_ir.CompiledGraph):
        raise NotPlannable(f"a graph is not compiled ({type(compiled).__name__})")
    try:
        return inductor_ir.save_compiled_graph(compiled, backends)
    except inductor_ir.NotSaveable as error:
        raise NotPlannable(str(error)) from error


class _LoadedStaticRunner:
    """A loaded graph with static shapes, called boxed (``runner(args)``) without input checks.

    As for freshly compiled graphs (`backends/inductor.py`): aotgrad calls it only with inputs of
    the region it was compiled for, whose key pins every input's dtype, shape and strides.
    """

    boxed_call: Literal[True] = True

    def __init__(self, loaded: inductor_ir.LoadedGraph) -> None:
        self.compiled = loaded
        self._call = loaded.call
        spec = loaded.output_spec
        self._spec = spec
        self._flat = spec is None or (
            spec.type in (tuple, list) and all(spec.child(i).is_leaf() for i in range(spec.num_children))
        )

    def __call__(self, args: list[Any]) -> Any:
        """Run the wrapper on the flat inputs (emptied); return its outputs."""
        outputs = self._call(args)
        if self._flat or self._spec is None:
            return outputs
        return pytree.tree_unflatten(list(outputs), self._spec)


def load_runner(saved: inductor_ir.SavedGraph, backends: Mapping[str, Any]) -> Callable[..., Any]:
    """A runner of `saved` with its kernels loaded by `backends` (raises if they cannot be)."""
    loaded = inductor_ir.load_saved_graph(saved, backends)
    return _LoadedStaticRunner(loaded) if saved.static else loaded
