"""Lowerings of 2-d pooling as pointwise ops over an unrolled window: max_pool2d_with_indices, avg_pool2d.

Each output element reads its ``kh * kw`` window with masked loads (padding reads nothing), so
small windows (the common 2x2, 3x3) become straight-line code a backend can vectorize. Large
windows fall back to ATen.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.nodes import IRNode, Pointwise
from inductor_ir.lowering.common import compute_dtype_for, convert, load_converted
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import sympify_int

aten = torch.ops.aten
Index = Sequence[sympy.Expr]
MAX_WINDOW = 25


def _pair(value: Any, default: int | None = None) -> tuple[int, int]:
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        assert default is not None
        return default, default
    if isinstance(value, int):
        return value, value
    return (int(value[0]), int(value[-1])) if len(value) else (0, 0)


def _out_sizes(ctx: LoweringContext) -> tuple[sympy.Expr, ...]:
    val = ctx.meta()
    if isinstance(val, (list, tuple)):
        val = val[0]
    if not isinstance(val, torch.Tensor):
        raise NotLowerable("pooling without recorded output shape")
    return tuple(sympify_int(s) for s in val.shape)


def _window(
    x: IRNode, index: Index, kernel: tuple[int, int], stride: tuple[int, int], padding: tuple[int, int], dilation: tuple[int, int]
) -> list[tuple[Any, Any, list[sympy.Expr]]]:
    """Per window position: (in-bounds mask value, flat h*W+w index value, input index)."""
    size = x.get_size()
    height, width = size[-2], size[-1]
    oh, ow = index[-2], index[-1]
    out = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            h = oh * stride[0] - padding[0] + i * dilation[0]
            w = ow * stride[1] - padding[1] + j * dilation[1]
            hv, wv = ops.index_expr(h, torch.int64), ops.index_expr(w, torch.int64)
            zero = ops.constant(0, torch.int64)
            inside = ops.logical_and(
                ops.logical_and(ops.ge(hv, zero), ops.lt(hv, ops.index_expr(height, torch.int64))),
                ops.logical_and(ops.ge(wv, zero), ops.lt(wv, ops.index_expr(width, torch.int64))),
            )
            out.append((inside, ops.index_expr(h * width + w, torch.int64), [*index[:-2], h, w]))
    return out


@lowering(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(ctx: LoweringContext, x: IRNode, kernel_size: Any, stride: Any = (), padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False) -> tuple[IRNode, IRNode]:  # fmt: skip
    """(max over each window, flat index h*W+w of the max) as eager's kernels pick it: scanning the
    window row by row from its first element inside the input, an element is taken when it is
    greater or NaN, so the last NaN wins, and a window of -inf (or padding and -inf) points at its
    first element inside the input."""
    kernel = _pair(kernel_size)
    steps, pads, dils = _pair(stride, kernel[0]), _pair(padding), _pair(dilation)
    if kernel[0] * kernel[1] > MAX_WINDOW or not x.dtype.is_floating_point:
        raise NotLowerable("large window or integer max_pool")
    out = _out_sizes(ctx)
    acc = compute_dtype_for(x.dtype)
    load, src = x.make_loader(), x.dtype
    # Without padding every window starts inside the input (a ceil_mode window too).
    starts_inside = pads == (0, 0)

    def best(index: Index) -> tuple[Any, Any]:
        value, where_at, seen = None, None, None
        for inside, flat, at in _window(x, index, kernel, steps, pads, dils):
            v = ops.masked(inside, functools.partial(load_converted, load, at, acc, src), float("-inf"))
            if value is None:
                value, where_at, seen = v, flat, inside
                continue
            take = ops.logical_or(ops.gt(v, value), ops.isnan(v))
            if not starts_inside:  # the first element inside the input starts the scan
                take = ops.logical_or(take, ops.logical_and(inside, ops.logical_not(seen)))
                seen = ops.logical_or(seen, inside)
            value = ops.where(take, v, value)
            where_at = ops.where(take, flat, where_at)
        return value, where_at

    values = Pointwise(lambda index: convert(best(index)[0], x.dtype, acc), out, x.dtype, x.device, (ctx.origin,))
    indices = Pointwise(lambda index: best(index)[1], out, torch.int64, x.device, (ctx.origin,))
    return values, indices


@lowering(aten.avg_pool2d.default)
def avg_pool2d(ctx: LoweringContext, x: IRNode, kernel_size: Any, stride: Any = (), padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Any = None) -> Pointwise:  # fmt: skip
    """Window sums divided by the window size (clipped as torch does)."""
    kernel = _pair(kernel_size)
    steps, pads = _pair(stride, kernel[0]), _pair(padding)
    if kernel[0] * kernel[1] > MAX_WINDOW or not x.dtype.is_floating_point:
        raise NotLowerable("large window or integer avg_pool")
    out = _out_sizes(ctx)
    acc = compute_dtype_for(x.dtype)
    load, src = x.make_loader(), x.dtype
    height, width = x.get_size()[-2], x.get_size()[-1]

    def extent(o: sympy.Expr, k: int, s: int, p: int, n: sympy.Expr) -> Any:
        start = ops.index_expr(o * s - p, torch.int64)
        end = ops.minimum(ops.add(start, ops.constant(k, torch.int64)), ops.index_expr(n + p, torch.int64))
        if not count_include_pad:
            start = ops.maximum(start, ops.constant(0, torch.int64))
            end = ops.minimum(end, ops.index_expr(n, torch.int64))
        return ops.sub(end, start)

    def inner(index: Index) -> Any:
        total = ops.constant(0.0, acc)  # eager's sum starts at +0.0: a window of -0.0 averages to +0.0
        for inside, _, at in _window(x, index, kernel, steps, pads, (1, 1)):
            v = ops.masked(inside, functools.partial(load_converted, load, at, acc, src), 0.0)
            total = ops.add(total, v)
        if divisor_override:
            divisor = ops.constant(float(divisor_override), acc)
        else:
            count = ops.mul(extent(index[-2], kernel[0], steps[0], pads[0], height),
                            extent(index[-1], kernel[1], steps[1], pads[1], width))  # fmt: skip
            divisor = ops.to_dtype(count, acc, torch.int64)
        return convert(ops.truediv(total, divisor), x.dtype, acc)

    return Pointwise(inner, out, x.dtype, x.device, (ctx.origin,))
