"""Which joint-graph nodes the min-cut partitioner may recompute in the backward, and their sizes.

Cheap ops (pointwise, views, broadcasts, constants, casts) may be recomputed; everything else
(matmul, convolution, reductions, normalizations, random ops, gathers and scatters) is computed
once in the forward and saved when the backward needs it.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from aotgrad.tracing.graph_passes import is_random

aten = torch.ops.aten

# Not tagged pointwise and not views, yet cheap to recompute (memory movement or constants).
CHEAP_OPS: frozenset[Any] = frozenset(
    {
        aten.expand.default,
        aten.clone.default,
        aten._to_copy.default,
        aten.copy.default,
        aten.full.default,
        aten.full_like.default,
        aten.zeros.default,
        aten.zeros_like.default,
        aten.ones.default,
        aten.ones_like.default,
        aten.scalar_tensor.default,
        aten.empty.memory_format,
        aten.empty_like.default,
        aten.empty_strided.default,
        aten.where.self,
        aten.cat.default,
        aten.constant_pad_nd.default,
        aten.squeeze.dims,
        aten.unsqueeze.default,
        aten.view.default,
        aten._unsafe_view.default,
        aten.permute.default,
        aten.t.default,
        aten.transpose.int,
        aten.slice.Tensor,
        aten.select.int,
        aten.reshape.default,
        aten.lift_fresh_copy.default,
    }
)


def is_recomputable(node: torch.fx.Node) -> bool:
    """True when `node` may be recomputed in the backward instead of saved."""
    if node.op == "get_attr":
        return True  # a constant of the graph: the backward reads it as well
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload) or is_random(node):
        return False
    return target in CHEAP_OPS or target.is_view or torch.Tag.pointwise in target.tags


def value_bytes(value: Any) -> int | None:
    """Bytes of a traced value (`node.meta["val"]`): a tensor's size, 8 for a number, None for others."""
    if isinstance(value, torch.Tensor):
        numel = value.numel()
        numel = int(numel.node.hint) if isinstance(numel, torch.SymInt) and numel.node.hint is not None else numel
        try:
            return int(numel) * value.element_size()
        except TypeError:
            return 1 << 20  # an unbacked symbolic size: call it a megabyte
    if isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return 8
    return None


def node_bytes(node: torch.fx.Node) -> int | None:
    """Bytes saving `node` would cost, or None when it cannot be saved (e.g. a tuple of results)."""
    return value_bytes(node.meta.get("val"))
