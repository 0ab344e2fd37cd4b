"""Checks on data-dependent values as graph nodes: `aten._assert_scalar(cond, msg)`.

`torch._check(n <= x.shape[1])` on an `item()` or `nonzero().size(0)` value records its condition in
the ShapeEnv (a deferred runtime assertion on the unbacked symbol `u0`), not in the graph `make_fx`
traces. A graph traced again (the second, functionalizing pass; the joint trace) makes fresh symbols
(`u1`) that the recorded assertion does not mention, so the check was lost. Written into the first
trace's graph as `_assert_scalar` nodes (torch's own op, which FX treats as side-effectful), it is
traced again with the graph, reaches every backend (an eager run raises from the op; a compiled
wrapper raises once the symbols are bound) and survives dead-code elimination
(`graph_passes.eliminate_dead_code`) and partitioning (`partition/split.py`: the forward runs it).

Each trace again must also make fresh symbols (`fresh_unbacked_symbols`): fake tensors remember the
result of `nonzero` (and `item`, `unique`) on them, so without it the second trace would reuse `u0`,
which `torch._check(m == 2)` made the ShapeEnv replace by 2; every check on it would then read as
True and be dropped, and the compiled code would return a result where eager raises.
"""

from __future__ import annotations

import torch
import torch.fx
from torch._guards import detect_fake_mode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts
from torch.utils import _pytree as pytree

__all__ = ["fresh_unbacked_symbols", "materialize_runtime_asserts"]


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


def fresh_unbacked_symbols(fake_inputs: object) -> None:
    """Make the next trace over `fake_inputs` give data-dependent ops fresh unbacked symbols.

    A fake tensor memoizes the symbol of `nonzero(t).size(0)` (and `t.item()`) for the fake mode's
    current epoch; advancing the epoch (as torch's AOTAutograd does between its traces) makes the
    next trace bind a new symbol that the graph's `_assert_scalar` nodes check, instead of reusing
    one that the ShapeEnv has since replaced by a constant. Call it before each trace again.
    """
    fake_mode = detect_fake_mode(fake_inputs)
    if fake_mode is not None:
        fake_mode.epoch += 1
