"""Lowerings of reductions: sum, prod, amax/amin, argmax/argmin, any/all, mean, var, softmax pieces.

Each reduction is a ``Reduction`` over the reduced dims (realized into a buffer by the graph
lowering); float16/bfloat16 inputs reduce in float32 and are cast back by a pointwise epilogue, and
integer sums and products of a dtype narrower than int64 (``sum(dtype=torch.uint8)``) in int64.
Variance (var, var_mean, and so the statistics of layer, batch and group norm) is one
``welford_reduce`` reduction giving (mean, m2, weight) in one pass over the data.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.nodes import IRNode, Pointwise, Reduction
from inductor_ir.lowering.common import compute_dtype_for, convert, expand_loader
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.lowering.welford_split import split_factor, split_welford
from inductor_ir.ops_handler import ops

aten = torch.ops.aten
Index = Sequence[sympy.Expr]


def _dims(x: IRNode, dims: Any) -> list[int]:
    ndim = len(x.get_size())
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % ndim if ndim else 0 for d in dims})


def make_reduction(
    ctx: LoweringContext,
    x: IRNode,
    dims: Any,
    keepdim: bool,
    reduction_type: str,
    *,
    src_dtype: torch.dtype,
    dtype: torch.dtype,
    transform: Any = None,
) -> Reduction:
    """A ``Reduction`` of ``transform(x)`` (default: ``x`` converted to ``src_dtype``) over ``dims``."""
    size = x.get_size()
    reduced = _dims(x, dims)
    if not size:
        reduced = []
    ranges: list[sympy.Expr] = []
    for k, n in enumerate(size):
        if k not in reduced:
            ranges.append(n)
        elif keepdim:
            ranges.append(sympy.Integer(1))
    rranges = [size[k] for k in reduced]
    load, x_dtype = x.make_loader(), x.dtype

    def full_index(index: Index, rindex: Index) -> list[sympy.Expr]:
        out: list[sympy.Expr] = []
        pos, rpos = 0, 0
        for k in range(len(size)):
            if k in reduced:
                out.append(rindex[rpos])
                rpos += 1
                if keepdim:
                    pos += 1
            else:
                out.append(index[pos])
                pos += 1
        return out

    def inner(index: Index, rindex: Index) -> Any:
        value = convert(load(full_index(index, rindex)), src_dtype, x_dtype)
        return transform(value, index) if transform is not None else value

    if not rranges:
        # Nothing to reduce (a 0-d input): the element itself, or index 0 for argmax/argmin.
        def identity(index: Index) -> Any:
            if reduction_type in ("argmax", "argmin"):
                return ops.constant(0, torch.int64)
            return convert(inner(index, []), dtype, src_dtype)

        return Pointwise(identity, tuple(ranges), dtype, x.device, (ctx.origin,))  # type: ignore[return-value]
    count = _static_count(rranges)
    if reduction_type in _UNROLLED and count is not None and 0 < count <= UNROLL_LIMIT:
        return _unrolled(ctx, inner, ranges, rranges, reduction_type, dtype, src_dtype, x.device)  # type: ignore[return-value]
    return Reduction(inner, tuple(ranges), tuple(rranges), reduction_type, dtype, src_dtype, x.device, (ctx.origin,))


# Sums and products over at most this many elements (a static count) are written out as a pointwise
# expression: a kernel of its own would read a few elements per output (the gradient of keys shared by
# 4 heads: 4), while a pointwise value fuses into the kernel that reads it.
UNROLL_LIMIT = 8
_UNROLLED = {"sum": (ops.add, 0), "prod": (ops.mul, 1)}


def _static_count(rranges: Sequence[sympy.Expr]) -> int | None:
    count = 1
    for n in rranges:
        if not isinstance(n, sympy.Integer):
            return None
        count *= int(n)
    return count


def _unrolled(
    ctx: LoweringContext,
    inner: Callable[[Index, Index], Any],
    ranges: Sequence[sympy.Expr],
    rranges: Sequence[sympy.Expr],
    reduction_type: str,
    dtype: torch.dtype,
    src_dtype: torch.dtype,
    device: str,
) -> Pointwise:
    """The reduction as one expression per output element: the identity combined with each element in
    order (starting from the identity keeps eager's +0.0 for a sum of negative zeros)."""
    combine, identity = _UNROLLED[reduction_type]
    positions = list(itertools.product(*(range(int(n)) for n in rranges)))

    def expression(index: Index) -> Any:
        total = ops.constant(identity, src_dtype)
        for position in positions:
            total = combine(total, inner(index, [sympy.Integer(k) for k in position]))
        return convert(total, dtype, src_dtype)

    return Pointwise(expression, tuple(ranges), dtype, device, (ctx.origin,))


def _cast(ctx: LoweringContext, value: IRNode, dtype: torch.dtype) -> IRNode:
    if value.dtype == dtype:
        return value
    buf = ctx.realize(value) if isinstance(value, Reduction) else value  # a pointwise value stays inlinable
    load, src = buf.make_loader(), buf.dtype
    return Pointwise(lambda index: convert(load(index), dtype, src), buf.get_size(), dtype, buf.device, (ctx.origin,))


def cast_to_requested(ctx: LoweringContext, x: IRNode, dtype: torch.dtype) -> IRNode:
    """``x`` as ``dtype``, element by element: a reduction given ``dtype=`` casts its input first, as
    eager does (a float32 input summed as float16 adds float16-rounded elements; a NaN summed into
    int32 is int32's minimum, not int64's cut down to 32 bits)."""
    if x.dtype == dtype:
        return x
    load, src = x.make_loader(), x.dtype
    return Pointwise(lambda index: convert(load(index), dtype, src), x.get_size(), dtype, x.device, (ctx.origin,))


def _simple(reduction_type: str) -> Callable[..., IRNode]:
    def lower(ctx: LoweringContext, x: IRNode, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> IRNode:
        out = ctx.out_dtype(dtype or x.dtype)
        if reduction_type in ("sum", "prod") and not out.is_floating_point and out != torch.bool:
            # As eager: integers add up in int64 and the result wraps to a narrower dtype once.
            acc = torch.int64
        elif reduction_type in ("sum", "prod"):
            acc = compute_dtype_for(out)
        else:
            acc = compute_dtype_for(x.dtype)
        if x.dtype == torch.bool and reduction_type in ("max", "min"):
            raise NotLowerable("bool max/min")
        if dtype is not None:
            x = cast_to_requested(ctx, x, out)
        red = make_reduction(ctx, x, dim, keepdim, reduction_type, src_dtype=acc, dtype=acc)
        return _cast(ctx, red, out)

    return lower


lowering(aten.sum.dim_IntList)(_simple("sum"))
lowering(aten.amax.default)(_simple("max"))
lowering(aten.amin.default)(_simple("min"))


@lowering(aten.sum.default)
def sum_all(ctx: LoweringContext, x: IRNode, *, dtype: torch.dtype | None = None) -> IRNode:
    """Sum of every element."""
    return _simple("sum")(ctx, x, None, False, dtype=dtype)


@lowering(aten.prod.dim_int, aten.prod.default)
def prod(ctx: LoweringContext, x: IRNode, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> IRNode:
    """Product over ``dim`` (all dims by default)."""
    return _simple("prod")(ctx, x, dim, keepdim, dtype=dtype)


@lowering(aten.argmax.default, aten.argmin.default)
def argmax(ctx: LoweringContext, x: IRNode, dim: int | None = None, keepdim: bool = False) -> IRNode:
    """Index of the first max/min (flattened when ``dim`` is None)."""
    if dim is None and keepdim:
        raise NotLowerable("argmax keepdim without dim")
    kind = ctx.origin
    if x.dtype == torch.bool:
        raise NotLowerable("argmax of bool")
    return make_reduction(ctx, x, dim, keepdim, kind, src_dtype=compute_dtype_for(x.dtype), dtype=torch.int64)


@lowering(aten.max.dim, aten.min.dim)
def max_dim(ctx: LoweringContext, x: IRNode, dim: int, keepdim: bool = False) -> tuple[IRNode, IRNode]:
    """(values, indices) of the max/min along ``dim``."""
    kind = ctx.origin
    if x.dtype == torch.bool:
        raise NotLowerable("max of bool")
    acc = compute_dtype_for(x.dtype)
    values = make_reduction(ctx, x, dim, keepdim, kind, src_dtype=acc, dtype=acc)
    indices = make_reduction(ctx, x, dim, keepdim, "arg" + kind, src_dtype=acc, dtype=torch.int64)
    return _cast(ctx, ctx.realize(values), x.dtype), ctx.realize(indices)


@lowering(aten.max.default, aten.min.default)
def max_all(ctx: LoweringContext, x: IRNode) -> IRNode:
    """Max/min of every element."""
    return _simple("max" if ctx.origin == "max" else "min")(ctx, x, None, False)


@lowering(aten.any.default, aten.any.dim, aten.any.dims, aten.all.default, aten.all.dim, aten.all.dims)
def any_all(ctx: LoweringContext, x: IRNode, dim: Any = None, keepdim: bool = False) -> IRNode:
    """Logical or (``any``) / and (``all``) over ``dim``.

    As eager, the result is uint8 (0 or 1) for a uint8 input and bool for every other dtype.
    """
    out = torch.uint8 if x.dtype == torch.uint8 else torch.bool
    if ctx.origin == "any":
        return _cast(ctx, make_reduction(ctx, x, dim, keepdim, "any", src_dtype=torch.bool, dtype=torch.bool), out)
    red = make_reduction(ctx, x, dim, keepdim, "any", src_dtype=torch.bool, dtype=torch.bool, transform=lambda v, _: ops.logical_not(v))
    buf = ctx.realize(red)
    load = buf.make_loader()
    return Pointwise(lambda index: convert(ops.logical_not(load(index)), out, torch.bool), buf.get_size(), out, buf.device, (ctx.origin,))


def _numel(x: IRNode, dims: Any) -> sympy.Expr:
    size = x.get_size()
    return sympy.Mul(*[size[k] for k in _dims(x, dims)]) if size else sympy.Integer(1)


def _scale(ctx: LoweringContext, value: IRNode, divisor: sympy.Expr, dtype: torch.dtype) -> Pointwise:
    """``value / divisor`` (divisor a size expression), computed in float and stored as ``dtype``."""
    buf = ctx.realize(value)
    load, src = buf.make_loader(), buf.dtype

    def inner(index: Index) -> Any:
        d = ops.to_dtype(ops.index_expr(divisor, torch.int64), src, torch.int64) if not divisor.is_number else ops.constant(float(divisor), src)
        return convert(ops.truediv(load(index), d), dtype, src)

    return Pointwise(inner, buf.get_size(), dtype, buf.device, (ctx.origin,))


@lowering(aten.mean.dim, aten.mean.default)
def mean(ctx: LoweringContext, x: IRNode, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> IRNode:
    """Sum over ``dim`` divided by the count."""
    out = ctx.out_dtype(dtype or x.dtype)
    if not out.is_floating_point:
        raise NotLowerable("integer mean")
    acc = compute_dtype_for(out)
    if dtype is not None:
        x = cast_to_requested(ctx, x, out)
    total = make_reduction(ctx, x, dim, keepdim, "sum", src_dtype=acc, dtype=acc)
    return _scale(ctx, total, _numel(x, dim), out)


WELFORD_MEAN, WELFORD_M2, WELFORD_WEIGHT = 0, 1, 2


def welford(
    ctx: LoweringContext,
    x: IRNode,
    dims: Any,
    keepdim: bool,
    outputs: Sequence[int] = (WELFORD_MEAN, WELFORD_M2),
    moments_dtype: torch.dtype | None = None,
) -> list[IRNode]:
    """Results ``outputs`` of (mean, m2, weight) of ``x`` over ``dims``: one Welford reduction.

    Each requested result is a buffer computed by a sibling ``Reduction`` node (``output_index``
    0, 1 or 2) sharing one inner function; a fused kernel computes them in one pass. The values
    reduced are in the accumulation dtype, the results in ``moments_dtype`` (default: the same);
    ``m2`` is the sum of squared deviations from the mean, ``weight`` the element count. Results no
    one loads are dropped by the scheduler's dead-code elimination. A long reduction to few outputs
    is split in two stages (``welford_split.py``).
    """
    if not x.dtype.is_floating_point:
        raise NotLowerable("welford of a non-floating tensor")
    acc = compute_dtype_for(x.dtype)
    first = make_reduction(ctx, x, dims, keepdim, "welford_reduce", src_dtype=acc, dtype=moments_dtype or acc)
    if not isinstance(first, Reduction):
        # Nothing to reduce (a 0-d input): the element itself, one element, and a deviation of
        # (x - x)^2: +0, but NaN for an infinite or NaN element, as eager's first Welford step gives.
        load = first.make_loader()

        def squared_deviation(index: Index) -> Any:
            difference = ops.sub(load(index), load(index))
            return ops.mul(difference, difference)

        moments = first.dtype
        deviation = Pointwise(squared_deviation, first.ranges, moments, x.device, (ctx.origin,))
        count = Pointwise(lambda index: ops.constant(1.0, moments), first.ranges, moments, x.device, (ctx.origin,))
        trivial = [first, deviation, count]
        return [trivial[k] for k in outputs]
    split = split_factor(sympy.Mul(*first.ranges), sympy.Mul(*first.reduction_ranges))
    if split > 1:
        first = split_welford(ctx, first, split)  # long reductions to few outputs: two stages
    return [ctx.realize(dataclasses.replace(first, output_index=k)) for k in outputs]


def _variance(ctx: LoweringContext, x: IRNode, dim: Any, correction: Any, keepdim: bool) -> tuple[IRNode, IRNode]:
    """(var, mean) by one Welford reduction, both with ``keepdim`` shapes, in the accumulation dtype,
    or in float64 for float32 data on the CPU, as eager's CPU variance computes: there the sum of
    squared deviations of large values overflows float32 (values near 9e18, variance 1.3e37: m2 is
    past float32's largest value after 26 elements) where the variance itself does not; callers
    round the results to the output dtype."""
    if not x.dtype.is_floating_point:
        raise NotLowerable("integer var")
    acc = compute_dtype_for(x.dtype)
    if acc == torch.float32 and x.device == "cpu":
        acc = torch.float64
    n = _numel(x, dim)
    mean_value, m2 = welford(ctx, x, dim, keepdim, moments_dtype=acc)
    corr = 1 if correction is None else correction
    if isinstance(corr, float) and corr.is_integer():
        corr = int(corr)  # `x.std(dim)` traces correction=1.0: a Float in a size expression prints nowhere
    denominator = n - corr
    if denominator.is_number:
        divisor: sympy.Expr = sympy.Integer(0) if denominator <= 0 else sympy.sympify(denominator)
    elif float(corr) != int(corr):
        raise NotLowerable("a fractional correction with a symbolic element count")
    else:
        divisor = sympy.Max(denominator, 0)
    return _scale(ctx, m2, divisor, acc), mean_value


@lowering(aten.var.correction, aten.var_mean.correction)
def var(ctx: LoweringContext, x: IRNode, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    """Variance (and mean for ``var_mean``) with Bessel-style ``correction``."""
    variance, mean_value = _variance(ctx, x, dim, correction, keepdim)
    variance = _cast(ctx, variance, x.dtype)
    if ctx.origin == "var_mean":
        return variance, _cast(ctx, mean_value, x.dtype)
    return variance


@lowering(aten._softmax.default, aten._log_softmax.default)
def softmax(ctx: LoweringContext, x: IRNode, dim: int, half_to_float: bool) -> IRNode:
    """exp(x - max) / sum(exp(x - max)) (log_softmax: x - max - log(sum)) as two reductions + pointwise."""
    out = torch.float32 if half_to_float else x.dtype
    if not x.dtype.is_floating_point:
        raise NotLowerable("integer softmax")
    acc = compute_dtype_for(x.dtype)
    size = x.get_size()
    x_load, x_dtype = x.make_loader(), x.dtype
    amax = ctx.realize(make_reduction(ctx, x, dim, True, "max", src_dtype=acc, dtype=acc))
    max_load = expand_loader(amax, size)

    def shifted(index: Index) -> Any:
        return ops.sub(convert(x_load(index), acc, x_dtype), max_load(index))

    exp = Pointwise(lambda index: ops.exp(shifted(index)), size, acc, x.device, (ctx.origin,))
    total = ctx.realize(make_reduction(ctx, exp, dim, True, "sum", src_dtype=acc, dtype=acc))
    sum_load = expand_loader(total, size)
    log = ctx.origin == "_log_softmax"
    # eager's CPU kernel for the last dim multiplies by the sum's reciprocal (one division per row, as
    # here once the compiler hoists it); over other dims, and on CUDA, it divides.
    reciprocal = str(x.device).startswith("cpu") and bool(size) and dim % len(size) == len(size) - 1

    def inner(index: Index) -> Any:
        if log:
            value = ops.sub(shifted(index), ops.log(sum_load(index)))
        elif reciprocal:
            value = ops.mul(ops.exp(shifted(index)), ops.truediv(ops.constant(1.0, acc), sum_load(index)))
        else:
            value = ops.truediv(ops.exp(shifted(index)), sum_load(index))
        return convert(value, out, acc)

    return Pointwise(inner, size, out, x.device, (ctx.origin,))
