"""Checks on data-dependent values as graph nodes: `aten._assert_scalar(cond, msg)`.

`torch._check(n <= x.shape[1])` on an `item()` or `nonzero().size(0)` value records its condition in
the ShapeEnv (a deferred runtime assertion on the unbacked symbol `u0`), not in the graph `make_fx`
traces. A graph traced again (the second, functionalizing pass; the joint trace) makes fresh symbols
(`u1`) that the recorded assertion does not mention, so the check was lost. Written into the first
trace's graph as `_assert_scalar` nodes (torch's own op, which FX treats as side-effectful), it is
traced again with the graph, reaches every backend (an eager run raises from the op; a compiled
wrapper raises once the symbols are bound) and survives dead-code elimination
(`graph_passes.eliminate_dead_code`) and partitioning (`partition/split.py`: the forward runs it).
"""

from __future__ import annotations

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts
from torch.utils import _pytree as pytree

__all__ = ["materialize_runtime_asserts"]


def _unbacked_shape_env(graph: torch.fx.Graph) -> ShapeEnv | None:
    """The ShapeEnv of the first node that binds an unbacked symbol (None: the graph binds none)."""
    for node in graph.nodes:
        if node.meta.get("unbacked_bindings"):
            shape_env = _shape_env_of(node.meta.get("val"))
            if shape_env is not None:
                return shape_env
    return None


def _shape_env_of(value: object) -> ShapeEnv | None:
    for item in pytree.tree_leaves(value):
        sizes = [*item.shape] if isinstance(item, torch.Tensor) else [item]
        for size in sizes:
            shape_env = getattr(getattr(size, "node", None), "shape_env", None)
            if isinstance(shape_env, ShapeEnv):
                return shape_env
    return None


def materialize_runtime_asserts(gm: torch.fx.GraphModule) -> None:
    """Insert the ShapeEnv's runtime assertions on the unbacked symbols `gm` binds as
    `aten._assert_scalar` nodes right after their symbols are bound (torch's
    `insert_deferred_runtime_asserts`, which dynamo runs on its graphs), and regenerate its code.

    Only graphs with data-dependent values change: one without unbacked symbols is left alone.
    Call it under the fake mode of the trace that made `gm`, before tracing `gm` again.
    """
    shape_env = _unbacked_shape_env(gm.graph)
    if shape_env is None:
        return
    insert_deferred_runtime_asserts(gm, shape_env, "aotgrad")
    gm.recompile()
