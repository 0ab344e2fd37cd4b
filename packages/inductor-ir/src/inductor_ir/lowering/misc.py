"""Lowerings of composite ops that are cheap to express directly: flip, diagonal, repeat, vector norms,
fmax/fmin, copysign, round with decimals, conj of real tensors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.layout import Layout
from inductor_ir.ir.nodes import IndexView, IRNode, Pointwise, ReinterpretView
from inductor_ir.lowering.common import compute_dtype_for, convert, make_pointwise, promote_dtypes, stretches
from inductor_ir.lowering.reductions import _simple, cast_to_requested, make_reduction
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.lowering.views import _strided
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import ModularIndexing, sympify_int

aten = torch.ops.aten
Index = Sequence[sympy.Expr]


@lowering(aten.flip.default)
def flip(ctx: LoweringContext, x: IRNode, dims: Sequence[int]) -> IRNode:
    """Reverse the order along ``dims`` (index arithmetic)."""
    size = x.get_size()
    flipped = {d % len(size) for d in dims} if size else set()
    return IndexView(x, size, lambda index: [size[k] - 1 - index[k] if k in flipped else index[k] for k in range(len(size))])


@lowering(aten.diagonal.default)
def diagonal(ctx: LoweringContext, x: IRNode, offset: int = 0, dim1: int = 0, dim2: int = 1) -> IRNode:
    """The diagonal of dims ``dim1``/``dim2`` as the last dim."""
    size = list(x.get_size())
    d1, d2 = dim1 % len(size), dim2 % len(size)
    if d1 == d2:
        raise NotLowerable("diagonal of one dim")
    n1, n2 = size[d1], size[d2]
    if not (n1.is_number and n2.is_number):
        raise NotLowerable("symbolic diagonal")
    length = max(0, min(int(n1), int(n2) - offset) if offset >= 0 else min(int(n1) + offset, int(n2)))
    rest = [k for k in range(len(size)) if k not in (d1, d2)]
    out = tuple(size[k] for k in rest) + (sympy.Integer(length),)
    start1, start2 = (0, offset) if offset >= 0 else (-offset, 0)
    strided = _strided(x)
    if strided is not None:
        base, layout = strided
        stride = tuple(layout.stride[k] for k in rest) + (layout.stride[d1] + layout.stride[d2],)
        shift = layout.offset + start1 * layout.stride[d1] + start2 * layout.stride[d2]
        return ReinterpretView(base, Layout(layout.device, layout.dtype, out, stride, shift))

    def reindex(index: Index) -> list[sympy.Expr]:
        full: list[sympy.Expr] = [sympy.Integer(0)] * len(size)
        for pos, k in enumerate(rest):
            full[k] = index[pos]
        full[d1] = index[-1] + start1
        full[d2] = index[-1] + start2
        return full

    return IndexView(x, out, reindex)


@lowering(aten.repeat.default)
def repeat(ctx: LoweringContext, x: IRNode, repeats: Sequence[Any]) -> IRNode:
    """Tile ``x``: each output index reads ``index % size`` of the input."""
    size = list(x.get_size())
    reps = [sympify_int(r) for r in repeats]
    lead = len(reps) - len(size)
    if lead < 0:
        raise NotLowerable("fewer repeats than dims")
    out = tuple(reps[:lead]) + tuple(size[k] * reps[lead + k] for k in range(len(size)))
    return IndexView(x, out, lambda index: [ModularIndexing(index[lead + k], 1, size[k]) for k in range(len(size))])


@lowering(aten.linalg_vector_norm.default)
def vector_norm(ctx: LoweringContext, x: IRNode, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                dtype: torch.dtype | None = None) -> IRNode:  # fmt: skip
    """``sum(|x| ** ord) ** (1 / ord)`` and the max/min/count special cases."""
    if not x.dtype.is_floating_point:
        raise NotLowerable("integer norm")
    out = dtype or x.dtype
    acc = compute_dtype_for(out)
    if dtype is not None:
        x = cast_to_requested(ctx, x, out)
    p = float(ord)
    single = _one_element_per_output(x, dim, keepdim)
    if single is not None:
        # Eager's norm of one element is |x| (x != 0 for ord 0), not (|x| ** ord) ** (1 / ord): no
        # overflow of x * x, no rounding.
        size, reindex = single
        load, src = x.make_loader(), x.dtype

        def one(index: Index) -> Any:
            v = convert(load(reindex(index)), acc, src)
            v = ops.to_dtype(ops.ne(v, ops.constant(0.0, acc)), acc, torch.bool) if p == 0 else ops.abs(v)
            return convert(v, out, acc)

        return Pointwise(one, size, out, x.device, (ctx.origin,))
    if p == float("inf") or p == float("-inf"):
        kind = "max" if p > 0 else "min"
        red = make_reduction(ctx, x, dim, keepdim, kind, src_dtype=acc, dtype=acc, transform=lambda v, _: ops.abs(v))
        return _finish(ctx, red, out, lambda v: v)
    if p == 0:
        red = make_reduction(ctx, x, dim, keepdim, "sum", src_dtype=acc, dtype=acc,
                             transform=lambda v, _: ops.to_dtype(ops.ne(v, ops.constant(0.0, acc)), acc, torch.bool))  # fmt: skip
        return _finish(ctx, red, out, lambda v: v)
    if p == 1:
        red = make_reduction(ctx, x, dim, keepdim, "sum", src_dtype=acc, dtype=acc, transform=lambda v, _: ops.abs(v))
        return _finish(ctx, red, out, lambda v: v)
    if p == 2:
        red = make_reduction(ctx, x, dim, keepdim, "sum", src_dtype=acc, dtype=acc, transform=lambda v, _: ops.mul(v, v))
        return _finish(ctx, red, out, ops.sqrt)
    red = make_reduction(ctx, x, dim, keepdim, "sum", src_dtype=acc, dtype=acc,
                         transform=lambda v, _: ops.pow(ops.abs(v), ops.constant(p, acc)))  # fmt: skip
    return _finish(ctx, red, out, lambda v: ops.pow(v, ops.constant(1.0 / p, acc)))


def _one_element_per_output(x: IRNode, dim: Any, keepdim: bool) -> tuple[tuple[Any, ...], Any] | None:
    """(output size, output index -> input index) where each output of reducing ``x`` over ``dim``
    has exactly one element; otherwise None."""
    size = list(x.get_size())
    if not size:  # eager reduces a 0-d tensor over an explicit dim 0 as a reduction
        return ((), lambda index: []) if dim is None or (isinstance(dim, (list, tuple)) and not dim) else None
    dims = range(len(size)) if dim is None or (isinstance(dim, (list, tuple)) and not dim) else (
        [dim] if isinstance(dim, int) else dim)  # fmt: skip
    reduced = {d % len(size) for d in dims}
    if any(sympy.sympify(size[d]) != 1 for d in reduced):
        return None
    if keepdim:
        return tuple(size), lambda index: list(index)
    kept = [d for d in range(len(size)) if d not in reduced]

    def reindex(index: Index) -> list[Any]:
        full: list[Any] = [sympy.Integer(0)] * len(size)
        for k, d in enumerate(kept):
            full[d] = index[k]
        return full

    return tuple(size[d] for d in kept), reindex


def _finish(ctx: LoweringContext, red: IRNode, out: torch.dtype, fn: Any) -> Pointwise:
    buf = ctx.realize(red)
    load, acc = buf.make_loader(), buf.dtype
    return Pointwise(lambda index: convert(fn(load(index)), out, acc), buf.get_size(), out, buf.device, (ctx.origin,))


@lowering(aten.fmax.default, aten.fmin.default)
def fmax(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    """max/min ignoring NaN (NaN only when both are NaN).

    Ties keep the operand eager keeps, which matters for -0.0 against +0.0: ATen's CPU kernel returns
    the first operand for float16/float32/float64 and the second for bfloat16, whatever the layout,
    size or position (measured; see docs/testing.md). `ops.minimum`/`ops.maximum` promise no side.
    """
    dtype = ctx.out_dtype(promote_dtypes(a, b))
    is_max = ctx.origin == "fmax"
    pick = ops.maximum if is_max else ops.minimum

    def fn(x: Any, y: Any) -> Any:
        if not dtype.is_floating_point:
            return pick(x, y)
        kept, other = (y, x) if dtype == torch.bfloat16 else (x, y)
        beats = ops.gt(other, kept) if is_max else ops.lt(other, kept)
        return ops.where(ops.isnan(x), y, ops.where(ops.isnan(y), x, ops.where(beats, other, kept)))

    return make_pointwise(ctx, fn, [a, b], compute_dtype=compute_dtype_for(dtype), out_dtype=dtype)


@lowering(aten.copysign.Tensor, aten.copysign.Scalar)
def copysign(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    """|a| with the sign of b."""
    dtype = ctx.out_dtype(promote_dtypes(a, b))
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    return make_pointwise(ctx, lambda x, y: ops.where(ops.signbit(y), ops.neg(ops.abs(x)), ops.abs(x)), [a, b],
                          compute_dtype=compute_dtype_for(dtype), out_dtype=dtype)  # fmt: skip


@lowering(aten.round.decimals)
def round_decimals(ctx: LoweringContext, x: IRNode, *, decimals: int = 0) -> Pointwise:
    """round(x * 10**decimals) / 10**decimals."""
    if not x.dtype.is_floating_point:
        raise NotLowerable("integer round")
    acc = compute_dtype_for(x.dtype)
    scale = 10.0**decimals

    def fn(v: Any) -> Any:
        if decimals >= 0:
            return ops.truediv(ops.round(ops.mul(v, ops.constant(scale, acc))), ops.constant(scale, acc))
        return ops.mul(ops.round(ops.truediv(v, ops.constant(1.0 / scale, acc))), ops.constant(1.0 / scale, acc))

    return make_pointwise(ctx, fn, [x], compute_dtype=acc, out_dtype=x.dtype)


@lowering(aten._conj.default, aten._conj_physical.default, aten.conj_physical.default, aten.resolve_conj.default,
          aten.resolve_neg.default, aten.positive.default)  # fmt: skip
def conj_real(ctx: LoweringContext, x: IRNode) -> IRNode:
    """The identity on real tensors."""
    if x.dtype.is_complex:
        raise NotLowerable("complex conj")
    return x


prims = torch.ops.prims


@lowering(prims.broadcast_in_dim.default)
def broadcast_in_dim(ctx: LoweringContext, x: IRNode, shape: Sequence[Any], broadcast_dimensions: Sequence[int]) -> IRNode:
    """Place ``x``'s dims at ``broadcast_dimensions`` of ``shape``; the rest broadcast."""
    out = tuple(sympify_int(s) for s in shape)
    size = x.get_size()
    pinned = [size[j] != out[d] and stretches(size[j], ctx.program.hint) for j, d in enumerate(broadcast_dimensions)]

    def reindex(index: Index) -> list[sympy.Expr]:
        return [sympy.Integer(0) if pinned[j] else index[d] for j, d in enumerate(broadcast_dimensions)]

    return IndexView(x, out, reindex)


@lowering(prims.sum.default)
def prims_sum(ctx: LoweringContext, x: IRNode, dims: Sequence[int], *, output_dtype: torch.dtype | None = None) -> IRNode:
    """Sum over ``dims``."""
    return _simple("sum")(ctx, x, list(dims), False, dtype=output_dtype)


@lowering(prims.var.default)
def prims_var(ctx: LoweringContext, x: IRNode, dims: Sequence[int], correction: float = 1, *,
              output_dtype: torch.dtype | None = None) -> IRNode:  # fmt: skip
    """Variance over ``dims``."""
    from inductor_ir.lowering.reductions import _cast, _variance

    variance, _ = _variance(ctx, x, list(dims), correction, False)
    return _cast(ctx, variance, output_dtype or x.dtype)


@lowering(prims.div.default)
def prims_div(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    """True division for floats, truncation for integers."""
    dtype = ctx.out_dtype(promote_dtypes(a, b))
    fn = ops.truediv if dtype.is_floating_point else ops.truncdiv
    return make_pointwise(ctx, fn, [a, b], compute_dtype=compute_dtype_for(dtype), out_dtype=dtype)
