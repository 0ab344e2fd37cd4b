"""Large ``index_put`` as an in-place ATen call on a fresh copy, and tied embeddings' gradients
folded into it.

``index_put`` over too many sources for the dense form (``scatter.py``) used to run as ATen's
functional op, which clones ``x`` and then writes into the clone. Here the clone is a buffer this
lowering realizes itself (so the copy fuses into whatever computes ``x``: a cast, a transpose) and
ATen's ``index_put_`` writes into it. No other IR node reads that buffer, so mutating it is safe;
the op's schema returns an alias of it, which keeps the memory planner from reusing its memory.

A model whose input and output embeddings share one table (GPT-2, LLaMA with tied embeddings) gets
the table's gradient as ``add(g_out, embedding_dense_backward(g_in, ids, ...))``: ATen's kernel
zero-fills a whole vocabulary-sized table, scatters the rows into it, and a third kernel adds the
two gradients (on LLaMA-3.2-1B: a 1 GB fill and 2 GB more read and written than needed).
``fold_embedding_gradients`` rewrites it to ``index_put(g_out, [ids], g_in, accumulate=True)``, the
same sum (only the order of floating-point additions differs), which lowers as above: the table is
written once, by the kernel that computes ``g_out``, and only the rows of the batch's tokens are
touched again. An untied embedding's gradient keeps ATen's kernel: its zero fill has nothing to fuse
into (every row a token does not reach must be written as zero by someone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

import torch
import torch.fx

from inductor_ir.ir.nodes import ExternKernel, IRNode, Pointwise
from inductor_ir.lowering.registry import LoweringContext, NotLowerable

__all__ = ["fold_embedding_gradients", "index_put_into_copy"]

aten = torch.ops.aten


def index_put_into_copy(
    ctx: LoweringContext, x: IRNode, indices: Sequence[IRNode | None], values: IRNode, accumulate: bool
) -> ExternKernel:
    """``index_put(x, indices, values, accumulate)`` as ATen's ``index_put_`` on a fresh copy of ``x``."""
    from inductor_ir.lower import layout_of

    val = ctx.meta()
    if not isinstance(val, torch.Tensor) or not isinstance(values, IRNode):
        raise NotLowerable("index_put without a recorded tensor result")
    layout = layout_of(val)
    # Always a new Pointwise: realizing `x` itself could return a buffer other nodes read.
    copy = Pointwise(x.make_loader(), tuple(x.get_size()), x.dtype, x.device, ("index_put",))
    fresh = ctx.realize(copy, layout.stride)
    realized = [None if index is None else ctx.realize(index) for index in indices]
    args = (fresh, realized, ctx.realize(values), accumulate)
    return ctx.register(ExternKernel(ctx.new_name(), layout, aten.index_put_.default, args, {}))  # type: ignore[return-value]


def _same_tensor_type(a: Any, b: Any) -> TypeGuard[torch.Tensor]:
    return (
        isinstance(a, torch.Tensor)
        and isinstance(b, torch.Tensor)
        and a.shape == b.shape
        and a.dtype == b.dtype
        and a.device == b.device
    )


def _match(node: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """``(add, other)`` when ``node``, an ``embedding_dense_backward`` without padding index or
    frequency scaling, is used only by ``add(other, node)`` (either order) of its own shape and dtype."""
    grad, _indices, _rows, padding_idx, scale_by_freq = (list(node.args) + [None] * 5)[:5]
    if padding_idx != -1 or scale_by_freq or not isinstance(grad, torch.fx.Node) or len(node.users) != 1:
        return None
    add = next(iter(node.users))
    if add.op != "call_function" or add.target is not aten.add.Tensor or add.kwargs or len(add.args) != 2:
        return None
    other = add.args[1] if add.args[0] is node else add.args[0]
    if other is node or not isinstance(other, torch.fx.Node):
        return None
    value = node.meta.get("val")
    if not (_same_tensor_type(value, other.meta.get("val")) and _same_tensor_type(value, add.meta.get("val"))):
        return None
    grad_value = grad.meta.get("val")
    if not isinstance(grad_value, torch.Tensor) or grad_value.dtype != value.dtype:
        return None
    return add, other


def fold_embedding_gradients(gm: torch.fx.GraphModule) -> int:
    """Rewrite ``add(g, embedding_dense_backward(g_in, ids, n, -1, False))`` to
    ``index_put(g, [ids], g_in, True)`` in ``gm`` (in place); returns how many it rewrote."""
    rewrites = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.embedding_dense_backward.default:
            continue
        match = _match(node)
        if match is None:
            continue
        add, other = match
        grad, indices = node.args[0], node.args[1]
        with gm.graph.inserting_before(add):
            folded = gm.graph.call_function(aten.index_put.default, (other, [indices], grad, True))
        folded.meta = dict(add.meta)
        add.replace_all_uses_with(folded)
        gm.graph.erase_node(add)
        gm.graph.erase_node(node)
        rewrites += 1
    if rewrites:
        gm.recompile()
    return rewrites
