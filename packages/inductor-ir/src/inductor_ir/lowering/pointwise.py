"""Lowerings of elementwise ATen ops: math, arithmetic, comparisons, logic, casts, ``where``, ``clamp``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from inductor_ir.ir.nodes import IRNode, Pointwise
from inductor_ir.lowering.common import (
    broadcast_shapes,
    compute_dtype_for,
    const,
    convert,
    expand_loader,
    make_pointwise,
    promote_dtypes,
    require_same_device,
)
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.ops_handler import ops

aten = torch.ops.aten
_op: Any

# -- unary ops that compute in floating point (integers are promoted to the default float) ------
_FLOAT_UNARY = {
    aten.sin: "sin", aten.cos: "cos", aten.tan: "tan", aten.asin: "asin", aten.acos: "acos",
    aten.atan: "atan", aten.sinh: "sinh", aten.cosh: "cosh", aten.tanh: "tanh", aten.asinh: "asinh",
    aten.acosh: "acosh", aten.atanh: "atanh", aten.exp: "exp", aten.exp2: "exp2", aten.expm1: "expm1",
    aten.log: "log", aten.log2: "log2", aten.log10: "log10", aten.log1p: "log1p", aten.sqrt: "sqrt",
    aten.rsqrt: "rsqrt", aten.sigmoid: "sigmoid", aten.erf: "erf", aten.erfc: "erfc",
    aten.lgamma: "lgamma", aten.reciprocal: "reciprocal",
}  # fmt: skip

# -- unary ops that keep the dtype (rounding ops are the identity on integers) ------------------
_SAME_UNARY = {aten.neg: "neg", aten.abs: "abs", aten.sign: "sign", aten.relu: "relu"}
_ROUNDING = {aten.floor: "floor", aten.ceil: "ceil", aten.trunc: "trunc", aten.round.default: "round"}


def _float_unary(op_name: str) -> Any:
    def lower(ctx: LoweringContext, x: IRNode) -> Pointwise:
        out = ctx.out_dtype(x.dtype if x.dtype.is_floating_point else torch.get_default_dtype())
        fn = getattr(ops, op_name)
        return make_pointwise(ctx, fn, [x], compute_dtype=compute_dtype_for(out), out_dtype=out)

    return lower


def _same_unary(op_name: str, *, identity_on_int: bool = False) -> Any:
    def lower(ctx: LoweringContext, x: IRNode) -> IRNode:
        if x.dtype == torch.bool and op_name in ("neg", "relu"):
            raise NotLowerable(f"{op_name} of bool")
        if identity_on_int and not x.dtype.is_floating_point:
            return x
        if op_name in ("abs", "sign") and x.dtype == torch.bool:
            return x
        fn = getattr(ops, op_name)
        return make_pointwise(ctx, fn, [x], compute_dtype=compute_dtype_for(x.dtype), out_dtype=x.dtype)

    return lower


for _op, _name in _FLOAT_UNARY.items():
    lowering(_op)(_float_unary(_name))
for _op, _name in _SAME_UNARY.items():
    lowering(_op)(_same_unary(_name))
for _op, _name in _ROUNDING.items():
    lowering(_op)(_same_unary(_name, identity_on_int=True))


@lowering(aten.isnan, aten.isinf, aten.signbit)
def _float_predicate(ctx: LoweringContext, x: IRNode) -> Pointwise:
    name = ctx.origin
    if not x.dtype.is_floating_point:
        # Integers are never NaN/inf; signbit of an integer is x < 0.
        if name == "signbit":
            return make_pointwise(ctx, lambda a: ops.lt(a, ops.constant(0, x.dtype)), [x], compute_dtype=x.dtype, result_dtype=torch.bool)
        return make_pointwise(ctx, lambda a: ops.constant(False, torch.bool), [x], compute_dtype=x.dtype, result_dtype=torch.bool)
    fn = getattr(ops, name)
    return make_pointwise(ctx, fn, [x], compute_dtype=x.dtype, result_dtype=torch.bool)


# -- binary arithmetic --------------------------------------------------------------------------
def _binary(
    ctx: LoweringContext, fn: Any, a: Any, b: Any, *, float_only: bool = False, round_scalars: bool = True
) -> Pointwise:
    dtype = promote_dtypes(a, b)
    if float_only and not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    out = ctx.out_dtype(dtype)
    compute = compute_dtype_for(out)
    return make_pointwise(ctx, fn, [a, b], compute_dtype=compute, out_dtype=out, round_scalars=round_scalars)


def _scaled(b: Any, alpha: Any) -> Any:
    if alpha is None or alpha == 1:
        return b
    raise NotLowerable("alpha")


def _with_alpha(ctx: LoweringContext, combine: Any, a: Any, b: Any, alpha: Any) -> Pointwise:
    """combine(a, alpha * b) in the promoted dtype."""
    dtype = promote_dtypes(a, b)
    out = ctx.out_dtype(dtype)
    compute = compute_dtype_for(out)
    scale = None if alpha is None or alpha == 1 else (float(alpha) if compute.is_floating_point else int(alpha))

    def fn(x: Any, y: Any) -> Any:
        if scale is not None:
            y = ops.mul(y, const(scale, compute))  # wrapped into a narrow int dtype, as eager's alpha
        return combine(x, y)

    return make_pointwise(ctx, fn, [a, b], compute_dtype=compute, out_dtype=out)


@lowering(aten.add.Tensor, aten.add.Scalar)
def add(ctx: LoweringContext, a: Any, b: Any, *, alpha: Any = None) -> Pointwise:
    """a + alpha * b (logical or for bools)."""
    if promote_dtypes(a, b) == torch.bool:
        return _binary(ctx, ops.logical_or, a, b)
    return _with_alpha(ctx, ops.add, a, b, alpha)


@lowering(aten.sub.Tensor, aten.sub.Scalar, aten.rsub.Tensor, aten.rsub.Scalar)
def sub(ctx: LoweringContext, a: Any, b: Any, *, alpha: Any = None) -> Pointwise:
    """a - alpha * b (``rsub``: b - alpha * a)."""
    if promote_dtypes(a, b) == torch.bool:
        raise NotLowerable("subtraction of bools")
    if ctx.origin == "rsub":
        return _with_alpha(ctx, ops.sub, b, a, alpha)
    return _with_alpha(ctx, ops.sub, a, b, alpha)


@lowering(aten.mul.Tensor, aten.mul.Scalar)
def mul(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    """a * b (logical and for bools)."""
    if promote_dtypes(a, b) == torch.bool:
        return _binary(ctx, ops.logical_and, a, b)
    # Eager's half mul reads a scalar operand at float32 precision (f16 * 0.7 is not f16 * 0.7002).
    return _binary(ctx, ops.mul, a, b, round_scalars=False)


@lowering(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode, aten.true_divide.Tensor)
def div(ctx: LoweringContext, a: Any, b: Any, *, rounding_mode: str | None = None) -> Pointwise:
    """a / b, optionally rounded ``floor`` or ``trunc``."""
    if rounding_mode is None:
        return _binary(ctx, ops.truediv, a, b, float_only=True, round_scalars=False)
    dtype = ctx.out_dtype(promote_dtypes(a, b))
    divisor_is_scalar = not isinstance(b, IRNode) or all(size == 1 for size in b.get_size())
    if dtype in (torch.float16, torch.bfloat16) and divisor_is_scalar:
        # By a scalar (a Python number or a tensor of one element, broadcast to every quotient)
        # eager's half kernels divide in float32, the scalar unrounded, and round once.
        return _binary(ctx, _float_division(rounding_mode), a, b, round_scalars=False)
    if dtype in (torch.float16, torch.bfloat16):
        # By a tensor, eager's half kernels round each step of the division to the half dtype:
        # trunc of the rounded quotient, and a floor division whose every intermediate is a half.
        if rounding_mode == "trunc":
            return _binary(ctx, lambda x, y: ops.trunc(_round_to(ops.truediv(x, y), dtype)), a, b)
        return _binary(ctx, lambda x, y: _half_floordiv(x, y, dtype), a, b)
    if rounding_mode == "trunc" and dtype.is_floating_point:
        return _binary(ctx, lambda x, y: ops.trunc(ops.truediv(x, y)), a, b)
    # Float floor division is ops.floordiv, not floor(a / b): eager derives it from fmod, which
    # differs where the quotient rounds or overflows (inf // 100 is nan, -1 // inf is -1).
    fn = ops.floordiv if rounding_mode == "floor" else ops.truncdiv
    return _binary(ctx, fn, a, b)


def _float_division(rounding_mode: str) -> Any:
    """The float division with ``rounding_mode`` in the compute dtype."""
    if rounding_mode == "trunc":
        return lambda x, y: ops.trunc(ops.truediv(x, y))
    return ops.floordiv


def _round_to(x: Any, dtype: torch.dtype) -> Any:
    """A float32 value rounded to the half ``dtype`` and back (eager's half result of one step)."""
    return ops.to_dtype(ops.to_dtype(x, dtype, torch.float32), torch.float32, dtype)


def _half_floordiv(x: Any, y: Any, dtype: torch.dtype) -> Any:
    """Floor division of float32 operands as eager's float16/bfloat16 kernel computes it.

    Eager runs its fmod-based floor division in half arithmetic, each step rounded to ``dtype``;
    in float32 the quotient can land on the other side of an integer (eager 29, float32 28).
    """
    f32 = torch.float32
    zero, one = const(0, f32), const(1, f32)
    quotient = ops.truediv(x, y)
    mod = ops.fmod(x, y)
    div = _round_to(ops.truediv(_round_to(ops.sub(x, mod), dtype), y), dtype)
    wrong_sign = ops.logical_and(ops.ne(mod, zero), ops.logical_xor(ops.lt(y, zero), ops.lt(mod, zero)))
    div = ops.where(wrong_sign, _round_to(ops.sub(div, one), dtype), div)
    floored = ops.floor(div)
    up = ops.gt(_round_to(ops.sub(div, floored), dtype), const(0.5, f32))
    result = ops.where(up, _round_to(ops.add(floored, one), dtype), floored)
    signed_zero = ops.where(ops.signbit(quotient), const(-0.0, f32), zero)
    result = ops.where(ops.eq(div, zero), signed_zero, result)
    # b == 0 gives the IEEE quotient (inf or nan), as eager's kernel does.
    return ops.where(ops.eq(y, zero), quotient, result)


@lowering(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    """a // b."""
    return div(ctx, a, b, rounding_mode="floor")


_BINARY = {
    aten.remainder.Tensor: "remainder", aten.remainder.Scalar: "remainder", aten.fmod.Tensor: "fmod",
    aten.fmod.Scalar: "fmod", aten.maximum.default: "maximum", aten.minimum.default: "minimum",
    aten.bitwise_and.Tensor: "bitwise_and", aten.bitwise_and.Scalar: "bitwise_and",
    aten.bitwise_or.Tensor: "bitwise_or", aten.bitwise_or.Scalar: "bitwise_or",
    aten.bitwise_xor.Tensor: "bitwise_xor", aten.bitwise_xor.Scalar: "bitwise_xor",
    aten.bitwise_left_shift.Tensor: "left_shift", aten.bitwise_right_shift.Tensor: "right_shift",
}  # fmt: skip
_FLOAT_BINARY = {aten.atan2.default: "atan2", aten.pow.Tensor_Tensor: "pow"}


def _binary_lowering(op_name: str, float_only: bool) -> Callable[..., Pointwise]:
    def lower(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
        dtype = promote_dtypes(a, b)
        if op_name in ("remainder", "fmod") and dtype == torch.bool:
            raise NotLowerable("bool remainder")
        if op_name == "pow" and not dtype.is_floating_point:
            raise NotLowerable("integer pow")
        return _binary(ctx, getattr(ops, op_name), a, b, float_only=float_only)

    return lower


for _op, _name in _BINARY.items():
    lowering(_op)(_binary_lowering(_name, False))
for _op, _name in _FLOAT_BINARY.items():
    lowering(_op)(_binary_lowering(_name, True))


@lowering(aten.pow.Tensor_Scalar)
def pow_tensor_scalar(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
    """tensor ** scalar. Eager computes ``** 0.5`` as sqrt and ``** -0.5`` as rsqrt (its CPU
    kernel not for float16, which calls pow): they differ from pow at -0.0 (sqrt gives -0.0, pow
    +0.0) and -inf (nan, pow +inf); ``x ** 0.5``'s gradient reads ``x ** -0.5``."""
    dtype = promote_dtypes(a, b)
    root = {0.5: ops.sqrt, -0.5: ops.rsqrt}.get(b) if isinstance(b, float) else None
    if root is not None and isinstance(a, IRNode) and dtype.is_floating_point and (
        dtype != torch.float16 or torch.device(a.device).type != "cpu"
    ):
        out = ctx.out_dtype(dtype)
        return make_pointwise(ctx, root, [a], compute_dtype=compute_dtype_for(out), out_dtype=out)
    return _binary_lowering("pow", True)(ctx, a, b)


@lowering(aten.pow.Scalar)
def pow_scalar(ctx: LoweringContext, a: Any, b: IRNode) -> Pointwise:
    """scalar ** tensor."""
    return _binary_lowering("pow", True)(ctx, a, b)


@lowering(aten.bitwise_not.default, aten.logical_not.default)
def bitwise_not(ctx: LoweringContext, x: IRNode) -> Pointwise:
    """~x, or ``not x`` (logical_not always returns bool)."""
    if ctx.origin == "logical_not":
        # Operands of logical ops are bool: convert (x != 0) first.
        return make_pointwise(ctx, ops.logical_not, [x], compute_dtype=torch.bool, out_dtype=ctx.out_dtype(torch.bool))
    if x.dtype.is_floating_point:
        raise NotLowerable("bitwise_not of float")
    return make_pointwise(ctx, ops.bitwise_not, [x], compute_dtype=x.dtype)


_LOGICAL = {aten.logical_and: "logical_and", aten.logical_or: "logical_or", aten.logical_xor: "logical_xor"}


def _logical_lowering(op_name: str) -> Any:
    def lower(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
        tensors = [v for v in (a, b) if isinstance(v, IRNode)]
        size = broadcast_shapes(*(t.get_size() for t in tensors), hint=ctx.program.hint)
        loaders = [(expand_loader(t, size, ctx.program.hint), t.dtype) for t in tensors]
        fn = getattr(ops, op_name)
        out = ctx.out_dtype(torch.bool)
        # Eager tests each operand in the promoted dtype: a 0-d int64 256 beside an int8 tensor is
        # 0 (wrapped), a float64 1e-50 beside a float32 tensor is 0 (rounded).
        common = promote_dtypes(a, b)

        def inner(index: Any) -> Any:
            vals = [_to_bool(convert(load(index), common, dtype), common) for load, dtype in loaders]
            return convert(fn(*vals), out, torch.bool)

        if len(tensors) != 2:
            raise NotLowerable("logical op with a scalar")
        return Pointwise(inner, size, out, tensors[0].device, (ctx.origin,))

    return lower


def _to_bool(value: Any, dtype: torch.dtype) -> Any:
    return convert(value, torch.bool, dtype)


for _op, _name in _LOGICAL.items():
    lowering(_op)(_logical_lowering(_name))


# -- comparisons -------------------------------------------------------------------------------
_COMPARE = {aten.eq: "eq", aten.ne: "ne", aten.lt: "lt", aten.le: "le", aten.gt: "gt", aten.ge: "ge"}


def _compare_lowering(op_name: str) -> Any:
    def lower(ctx: LoweringContext, a: Any, b: Any) -> Pointwise:
        dtype = promote_dtypes(a, b)
        fn = getattr(ops, op_name)
        return make_pointwise(ctx, fn, [a, b], compute_dtype=dtype, result_dtype=torch.bool)

    return lower


for _op, _name in _COMPARE.items():
    lowering(_op)(_compare_lowering(_name))


# -- where, clamp, casts -------------------------------------------------------------------------
@lowering(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(ctx: LoweringContext, condition: IRNode, a: Any, b: Any) -> Pointwise:
    """``a`` where ``condition`` else ``b``."""
    dtype = ctx.out_dtype(promote_dtypes(a, b))
    require_same_device(condition, a, b)
    size = broadcast_shapes(*(v.get_size() for v in (condition, a, b) if isinstance(v, IRNode)), hint=ctx.program.hint)
    cond_load = expand_loader(condition, size, ctx.program.hint)
    cond_dtype = condition.dtype

    def branch(v: Any) -> Any:
        if isinstance(v, IRNode):
            load, src = expand_loader(v, size, ctx.program.hint), v.dtype
            return lambda index: convert(load(index), dtype, src)
        from inductor_ir.lowering.common import const

        return lambda index: const(v, dtype)

    load_a, load_b = branch(a), branch(b)

    def inner(index: Any) -> Any:
        return ops.where(_to_bool(cond_load(index), cond_dtype), load_a(index), load_b(index))

    return Pointwise(inner, size, dtype, condition.device, (ctx.origin,))


@lowering(aten.clamp.default, aten.clamp.Tensor, aten.clamp_min.default, aten.clamp_max.default,
          aten.clamp_min.Tensor, aten.clamp_max.Tensor)  # fmt: skip
def clamp(ctx: LoweringContext, x: IRNode, lo: Any = None, hi: Any = None) -> Pointwise:
    """min(max(x, lo), hi), with NaN propagating; where x equals a number bound (±0.0), x.

    A NaN bound given as a number stays with ATen's kernel: what it does differs between torch
    releases (2.11 returns ``x`` unchanged for ``clamp(x, min=nan)``, 2.13 returns NaN), and the
    compiled graph must give the installed release's values.
    """
    if ctx.origin == "clamp_max":
        lo, hi = None, lo
    if any(isinstance(v, float) and math.isnan(v) for v in (lo, hi)):
        raise NotLowerable("a NaN clamp bound (eager's result depends on the torch release)")
    dtype = ctx.out_dtype(promote_dtypes(x, *(v for v in (lo, hi) if v is not None)))
    compute = compute_dtype_for(dtype)
    operands = [x] + [v for v in (lo, hi) if v is not None]
    lo_tensor, hi_tensor = isinstance(lo, IRNode), isinstance(hi, IRNode)

    def fn(value: Any, *bounds: Any) -> Any:
        # On a tie (-0.0 against a bound of 0.0) maximum/minimum keep their second operand. Eager's
        # clamp by a number keeps x (`clamp(-0.0, min=0)` is -0.0, so `1 / it` is -inf): the bound
        # goes first. By a tensor, eager's vectorized loop keeps the bound (its scalar tail keeps x).
        k = 0
        if lo is not None:
            value = ops.maximum(value, bounds[k]) if lo_tensor else ops.maximum(bounds[k], value)
            k += 1
        if hi is not None:
            value = ops.minimum(value, bounds[k]) if hi_tensor else ops.minimum(bounds[k], value)
        return value

    return make_pointwise(ctx, fn, operands, compute_dtype=compute, out_dtype=dtype)


@lowering(aten._to_copy.default)
def to_copy(ctx: LoweringContext, x: IRNode, *, dtype: torch.dtype | None = None, layout: Any = None,
            device: Any = None, pin_memory: Any = None, non_blocking: bool = False,
            memory_format: Any = None) -> Pointwise:  # fmt: skip
    """A copy, possibly to another dtype (device changes fall back)."""
    if device is not None and str(torch.device(device)) != str(torch.device(x.device)):
        raise NotLowerable("device copy")
    out = dtype or x.dtype
    load, src = x.make_loader(), x.dtype
    return Pointwise(lambda index: convert(load(index), out, src), x.get_size(), out, x.device, (ctx.origin,))


@lowering(torch.ops.prims.convert_element_type.default)
def convert_element_type(ctx: LoweringContext, x: IRNode, dtype: torch.dtype) -> Pointwise:
    """``x.to(dtype)``."""
    return to_copy(ctx, x, dtype=dtype)


@lowering(aten.clone.default, aten.alias.default, aten.lift_fresh_copy.default, aten.detach.default)
def clone(ctx: LoweringContext, x: IRNode, *, memory_format: Any = None) -> IRNode:
    """Values are immutable in a functional graph: a clone is the same value."""
    load = x.make_loader()
    return Pointwise(load, x.get_size(), x.dtype, x.device, (ctx.origin,))


@lowering(aten.copy.default)
def copy(ctx: LoweringContext, dst: IRNode, src: IRNode, non_blocking: bool = False) -> Pointwise:
    """Functional copy: ``src`` broadcast to ``dst``'s shape, in ``dst``'s dtype."""
    if src.device != dst.device:
        raise NotLowerable("device copy")
    load, src_dtype = expand_loader(src, dst.get_size(), ctx.program.hint), src.dtype
    return Pointwise(lambda index: convert(load(index), dst.dtype, src_dtype), dst.get_size(), dst.dtype, dst.device, (ctx.origin,))
