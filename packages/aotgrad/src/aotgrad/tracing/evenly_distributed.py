"""The gradient of a whole-tensor max, min or median on CPU, as eager's CPU kernel gives it.

Autograd's formula for these reductions (`evenly_distribute_backward`) spreads the incoming
gradient over the positions equal to the result. On CPU eager fills a zero tensor at those positions
(`masked_fill`); elsewhere (CUDA, and traced tensors, which is how the joint graph sees it) it
multiplies the mask by the share: ``mask * (grad / mask.sum())``. The two differ where the share is
NaN or infinite: eager's CPU gradient keeps 0 at the other positions, the product gives NaN there.
The rewrite here turns that product back into a selection on CPU tensors; CUDA keeps the product,
as eager's CUDA formula does.
"""

from __future__ import annotations

import torch
import torch.fx

aten = torch.ops.aten

__all__ = ["select_evenly_distributed_gradients"]

_OR = (aten.logical_or_.default, aten.logical_or.default)
_AND = (aten.logical_and_.default, aten.logical_and.default)


def _call(node: object, targets: tuple[object, ...]) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _is_equal_or_both_nan(mask: torch.fx.Node) -> bool:
    """Whether `mask` is ``(x == v) | (isnan(x) & isnan(v))``, the formula's positions of the result."""
    if not _call(mask, _OR) or len(mask.args) != 2:
        return False
    equal, both_nan = mask.args
    if not (_call(equal, (aten.eq.Tensor,)) and _call(both_nan, _AND)):
        return False
    assert isinstance(equal, torch.fx.Node) and isinstance(both_nan, torch.fx.Node)
    nans = both_nan.args
    if len(nans) != 2 or not all(_call(n, (aten.isnan.default,)) for n in nans):
        return False
    return [n.args[0] for n in nans] == list(equal.args[:2])  # type: ignore[union-attr]


def _on_cpu(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.device.type == "cpu"


def select_evenly_distributed_gradients(gm: torch.fx.GraphModule) -> int:
    """Rewrite ``mask * share`` as ``where(mask, share, 0)`` for CPU tensors; returns how many.

    Changes `gm`'s graph in place (its code is left stale).
    """
    graph = gm.graph
    rewritten = 0
    for node in list(graph.nodes):
        if not _call(node, (aten.mul.Tensor,)) or len(node.args) != 2:
            continue
        mask, share = node.args
        if not (isinstance(mask, torch.fx.Node) and isinstance(share, torch.fx.Node)):
            continue
        if not (_is_equal_or_both_nan(mask) and _on_cpu(node)):
            continue
        result = node.meta["val"]
        with graph.inserting_before(node):
            zero = graph.call_function(
                aten.scalar_tensor.default, (0.0,), {"dtype": result.dtype, "device": result.device}
            )
            selected = graph.call_function(aten.where.self, (mask, share, zero))
        zero.meta = {"val": result.new_zeros(())}
        selected.meta = dict(node.meta)
        node.replace_all_uses_with(selected)
        graph.erase_node(node)
        rewritten += 1
    return rewritten
