"""Attention written out by hand (``softmax(q @ k.T * scale) @ v``) becomes one fused attention call.

``fuse_attention(gm)`` rewrites, before lowering, the ATen pattern that ``q @ k.transpose(-1, -2)``,
an optional scale (``/ c`` or ``* c``), ``softmax(-1)`` and ``@ v`` trace to on 4-D ``(batch, heads,
seq, dim)`` CPU tensors::

    bmm(view(expand(q)), view(expand(k.transpose(-1, -2)))) -> view -> div -> _softmax -> expand -> view
    bmm(that, view(expand(v))) -> view

into ``_scaled_dot_product_flash_attention_for_cpu(q, k, v, scale=...)[0]``, the kernel eager runs
for ``F.scaled_dot_product_attention``. The decomposed form stores the whole ``(seq, seq)`` score
matrix twice (the matmul's result and the softmax's) and reads it twice; the fused kernel keeps
blocks of it in cache. Measured on CPU (a width-64, 4-head block, batch 4, 2 threads) the fused call
wins from sequence length ``MIN_FUSED_LENGTH`` on; below it the decomposed form (two small matmuls
and one fused softmax kernel) is as fast or faster, so shorter static sequences keep it. A sequence
length that is symbolic is fused (the long sequences are where it matters).

Only inference graphs match: in a training graph the softmax's result is also saved for the
backward, so it has two users and the pattern (which needs every intermediate to have one user)
does not apply. The scores must not be returned or reused, there is no mask or dropout, and q, k, v
are not broadcast (``expand`` to their own sizes).
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
import torch.fx

from inductor_ir.symbolic import sympify_int

__all__ = ["MIN_FUSED_LENGTH", "fuse_attention"]

aten = torch.ops.aten

MIN_FUSED_LENGTH = 256
"""Static key lengths from which the fused attention call replaces the decomposed form (measured)."""

_VIEWS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)
_FUSED = aten._scaled_dot_product_flash_attention_for_cpu.default


def fuse_attention(gm: torch.fx.GraphModule) -> int:
    """Rewrite each hand-written attention of ``gm`` into one fused call (in place); returns how many."""
    rewrites = 0
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is aten._softmax.default:
            match = _match(node)
            if match is not None:
                _rewrite(gm.graph, *match)
                rewrites += 1
    if rewrites:
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return rewrites


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _only_user(node: torch.fx.Node) -> torch.fx.Node | None:
    return next(iter(node.users)) if len(node.users) == 1 else None


def _batched_operand(node: Any) -> torch.fx.Node | None:
    """The 4-D value a bmm operand ``view(clone?(expand(x)))`` flattens, when ``expand`` is a no-op."""
    if not isinstance(node, torch.fx.Node) or node.target not in _VIEWS or len(node.users) != 1:
        return None
    inner = node.args[0]
    if isinstance(inner, torch.fx.Node) and inner.target is aten.clone.default and len(inner.users) == 1:
        inner = inner.args[0]
    if not isinstance(inner, torch.fx.Node) or inner.target is not aten.expand.default or len(inner.users) != 1:
        return None
    base = inner.args[0]
    base_val, expanded = _val(base), _val(inner)
    if not isinstance(base_val, torch.Tensor) or base_val.dim() != 4 or expanded is None:
        return None
    if tuple(base_val.shape) != tuple(expanded.shape):
        return None  # a broadcast (grouped heads): not handled
    return base  # type: ignore[no-any-return]


def _untransposed(node: torch.fx.Node) -> torch.fx.Node | None:
    """``k`` when ``node`` is ``k.transpose(-1, -2)`` of a 4-D ``k``."""
    if node.target is not aten.transpose.int or len(node.users) != 1:
        return None
    dims = sorted(d % 4 for d in node.args[1:3])
    return node.args[0] if dims == [2, 3] else None  # type: ignore[return-value]


def _scale_of(node: torch.fx.Node) -> tuple[torch.fx.Node, float | None] | None:
    """(scores, scale) for ``scores / c`` or ``scores * c`` (scale None: the kernel's default)."""
    if node.target in (aten.div.Tensor, aten.mul.Tensor) and len(node.users) == 1:
        scores, factor = node.args[0], node.args[1]
        if isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor != 0:
            scale = 1.0 / factor if node.target is aten.div.Tensor else float(factor)
            return scores, scale  # type: ignore[return-value]
        return None
    return node, 1.0


def _match(softmax: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node, torch.fx.Node, torch.fx.Node, float | None] | None:
    """(q, k, v, output view to replace, scale) of the attention around ``softmax``, or None."""
    x, dim = softmax.args[0], softmax.args[1]
    val = _val(softmax)
    if len(softmax.args) > 2 and softmax.args[2]:
        return None  # half_to_float
    if not isinstance(val, torch.Tensor) or val.dim() != 4 or dim % 4 != 3 or val.device.type != "cpu":
        return None
    if not val.is_floating_point() or len(softmax.users) != 1 or not isinstance(x, torch.fx.Node):
        return None
    scaled = _scale_of(x)
    if scaled is None:
        return None
    scores_view, scale = scaled
    if scores_view.target not in _VIEWS or len(scores_view.users) != 1:
        return None
    scores = scores_view.args[0]
    if not isinstance(scores, torch.fx.Node) or scores.target is not aten.bmm.default or len(scores.users) != 1:
        return None
    q, key_t = _batched_operand(scores.args[0]), _batched_operand(scores.args[1])
    k = _untransposed(key_t) if key_t is not None else None
    # softmax -> expand -> view -> bmm(., v) -> view (the attention's output)
    expand = _only_user(softmax)
    flat = _only_user(expand) if expand is not None and expand.target is aten.expand.default else None
    second = _only_user(flat) if flat is not None and flat.target in _VIEWS else None
    if q is None or k is None or second is None or second.target is not aten.bmm.default or second.args[0] is not flat:
        return None
    v = _batched_operand(second.args[1])
    out = _only_user(second)
    if v is None or out is None or out.target not in _VIEWS:
        return None
    if not _compatible(q, k, v, out):
        return None
    return q, k, v, out, scale


def _compatible(q: torch.fx.Node, k: torch.fx.Node, v: torch.fx.Node, out: torch.fx.Node) -> bool:
    """Same dtype and device; shapes (B, H, L, E), (B, H, S, E), (B, H, S, Ev); long enough to gain."""
    qv, kv, vv, ov = _val(q), _val(k), _val(v), _val(out)
    if not all(isinstance(t, torch.Tensor) for t in (qv, kv, vv, ov)):
        return False
    if len({t.dtype for t in (qv, kv, vv)}) != 1 or len({t.device.type for t in (qv, kv, vv)}) != 1:
        return False
    if qv.dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        return False
    if tuple(qv.shape[:2]) != tuple(kv.shape[:2]) or tuple(kv.shape[:3]) != tuple(vv.shape[:3]) or qv.shape[3] != kv.shape[3]:
        return False
    if tuple(ov.shape) != (*qv.shape[:3], vv.shape[3]):
        return False
    length = sympify_int(kv.shape[2])
    return not isinstance(length, sympy.Integer) or int(length) >= MIN_FUSED_LENGTH


def _rewrite(graph: torch.fx.Graph, q: torch.fx.Node, k: torch.fx.Node, v: torch.fx.Node, out: torch.fx.Node,
             scale: float | None) -> None:  # fmt: skip
    """Replace ``out`` by ``_scaled_dot_product_flash_attention_for_cpu(q, k, v, scale=scale)[0]``."""
    kwargs = {"scale": scale}
    with graph.inserting_before(out):
        fused = graph.call_function(_FUSED, (q, k, v), kwargs)
        first = graph.call_function(_getitem, (fused, 0))
    result = _FUSED(_val(q), _val(k), _val(v), **kwargs)  # on fake tensors: shapes and strides only
    fused.meta["val"] = result
    first.meta["val"] = result[0]
    first.meta.update({key: out.meta[key] for key in ("stack_trace",) if key in out.meta})
    out.replace_all_uses_with(first)


def _getitem(value: Any, index: int) -> Any:
    return value[index]
