"""Helpers shared by the lowerings: broadcasting, type promotion, building ``Pointwise`` values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.nodes import IRNode, Pointwise
from inductor_ir.lowering.registry import LoweringContext, NotLowerable
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import sympify_int

__all__ = [
    "Scalar",
    "broadcast_shapes",
    "compute_dtype_for",
    "const",
    "convert",
    "expand_loader",
    "is_float",
    "make_pointwise",
    "promote_dtypes",
    "require_same_device",
]

Scalar = bool | int | float
Index = Sequence[sympy.Expr]


def require_same_device(*values: Any) -> None:
    """Raise ``NotLowerable`` unless every IR value is on one device (kernels read one device's memory)."""
    devices = {v.device for v in values if isinstance(v, IRNode)}
    if len(devices) > 1:
        raise NotLowerable(f"operands on several devices: {sorted(devices)}")


def is_float(dtype: torch.dtype) -> bool:
    """Whether ``dtype`` is a floating dtype."""
    return dtype.is_floating_point


def compute_dtype_for(dtype: torch.dtype) -> torch.dtype:
    """The dtype arithmetic is done in: float16/bfloat16 compute in float32, as eager kernels do."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


Hint = Callable[[sympy.Expr], int]
"""A size expression's value at the example inputs (``Program.hint``)."""


def broadcast_shapes(*sizes: Sequence[sympy.Expr], hint: Hint | None = None) -> tuple[sympy.Expr, ...]:
    """The broadcast shape of several shapes (right-aligned; a dim of 1 stretches).

    ``hint``: also stretch a symbolic size that is 1 at the example inputs where another operand's
    size in that dim is not (``x[: s0 // 2]`` beside ``x`` at ``s0 = 3``): the trace that decided this
    broadcast guarded it to be 1 (see `stretches`).
    """
    ndim = max((len(s) for s in sizes), default=0)
    out: list[sympy.Expr] = []
    for k in range(ndim):
        candidates = [size[j] for size in sizes if (j := k - (ndim - len(size))) >= 0]
        dim: sympy.Expr = sympy.Integer(1)
        for size in candidates:
            if size != 1 and not (hint is not None and any(size != other for other in candidates)
                                  and stretches(size, hint)):
                dim = size
        out.append(dim)
    return tuple(out)


def stretches(size: sympy.Expr, hint: Hint | None) -> bool:
    """Whether a dim of ``size`` broadcasts as a dim of 1: literally 1, or (with ``hint``) a symbolic
    size that is 1 at the example inputs. The second is for dims whose operands' sizes differ: the
    trace that produced the graph then decided the broadcast and guarded the size to 1 (a size equal
    to the others by a guard would have been the same expression)."""
    if size == 1:
        return True
    if hint is None or sympy.sympify(size).is_number:
        return False
    try:
        return hint(size) == 1
    except (TypeError, ValueError):  # an unbacked size: no value to look at
        return False


def _dummy(value: Any) -> Any:
    if isinstance(value, IRNode):
        return torch.empty((1,) if value.get_size() else (), dtype=value.dtype, device="meta")
    if isinstance(value, sympy.Expr):
        return 1
    return value


def promote_dtypes(*values: Any) -> torch.dtype:
    """torch's result dtype for an op on these values (IR values and Python scalars)."""
    dummies = [_dummy(v) for v in values if v is not None]
    if not dummies:
        raise NotLowerable("no operands")
    result = dummies[0]
    if len(dummies) == 1:
        return result.dtype if isinstance(result, torch.Tensor) else torch.tensor(result).dtype
    dtype = torch.result_type(dummies[0], dummies[1])
    for extra in dummies[2:]:
        dtype = torch.result_type(torch.empty((1,), dtype=dtype, device="meta"), extra)
    return dtype


def const(value: Any, dtype: torch.dtype) -> Any:
    """``ops.constant`` for a Python scalar, ``ops.index_expr`` (then a cast) for a SymPy expression."""
    if isinstance(value, sympy.Expr) or hasattr(value, "node"):
        expr = sympify_int(value)
        if expr.is_number:
            return ops.constant(_as_python(expr, dtype), dtype)
        if not _is_integer_polynomial(expr):
            return _float_expression(expr, dtype if dtype.is_floating_point else torch.float32)
        result = ops.index_expr(expr, torch.int64)
        return result if dtype == torch.int64 else ops.to_dtype(result, dtype, torch.int64)
    return ops.constant(_as_python(value, dtype), dtype)


def _is_integer_polynomial(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is an index expression (integer coefficients, natural powers)."""
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Float) or (isinstance(node, sympy.Rational) and not node.is_Integer):
            return False
        if isinstance(node, sympy.Pow) and not (node.exp.is_Integer and int(node.exp) > 0):
            return False
    return True


def _float_expression(expr: sympy.Expr, dtype: torch.dtype) -> Any:
    """A floating-point value of a symbolic size expression (``s0 ** 0.5``, ``1 / s0``) as ops.

    Integer sub-expressions are index expressions, cast once; the rest is float arithmetic.
    """
    if expr.is_number:
        return ops.constant(float(expr), dtype)
    if _is_integer_polynomial(expr):
        return ops.to_dtype(ops.index_expr(expr, torch.int64), dtype, torch.int64)
    if isinstance(expr, sympy.Add):
        parts = [_float_expression(a, dtype) for a in expr.args]
        result = parts[0]
        for part in parts[1:]:
            result = ops.add(result, part)
        return result
    if isinstance(expr, sympy.Mul):
        parts = [_float_expression(a, dtype) for a in expr.args]
        result = parts[0]
        for part in parts[1:]:
            result = ops.mul(result, part)
        return result
    if isinstance(expr, sympy.Pow):
        base = _float_expression(expr.base, dtype)
        if expr.exp == sympy.Rational(1, 2) or expr.exp == 0.5:
            return ops.sqrt(base)
        if expr.exp == -1:
            return ops.reciprocal(base)
        if expr.exp == sympy.Rational(-1, 2) or expr.exp == -0.5:
            return ops.rsqrt(base)
        return ops.pow(base, _float_expression(expr.exp, dtype))
    raise NotLowerable(f"symbolic scalar {expr} has no float lowering")


def _as_python(value: Any, dtype: torch.dtype) -> Scalar:
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return wrap_int(int(value), dtype)


def wrap_int(value: int, dtype: torch.dtype) -> int:
    """``value`` wrapped (two's complement) into ``dtype``'s range, as eager casts a Python scalar
    operand to a narrow integer tensor's dtype: ``int8_tensor & 300`` is ``& 44``."""
    info = torch.iinfo(dtype)
    span = info.max - info.min + 1
    return (value - info.min) % span + info.min


def convert(x: Any, dtype: torch.dtype, src_dtype: torch.dtype) -> Any:
    """``ops.to_dtype`` when the dtypes differ."""
    return x if dtype == src_dtype else ops.to_dtype(x, dtype, src_dtype)


def load_converted(load: Callable[[Any], Any], index: Any, dtype: torch.dtype, src_dtype: torch.dtype) -> Any:
    """``convert(load(index), dtype, src_dtype)``: a masked body, bound with ``functools.partial``
    (a typed zero-argument callable, where a lambda with default arguments is not)."""
    return convert(load(index), dtype, src_dtype)


def expand_loader(value: IRNode, out_size: Sequence[sympy.Expr], hint: Hint | None = None) -> Callable[[Index], Any]:
    """A loader of ``value`` broadcast to ``out_size`` (right-aligned; dims of 1 read index 0; with
    ``hint``, also symbolic dims that are 1 at the example inputs where ``out_size`` differs: see
    `broadcast_shapes`)."""
    size = value.get_size()
    offset = len(out_size) - len(size)
    if offset < 0:
        raise NotLowerable(f"cannot broadcast {size} to {out_size}")
    inner = value.make_loader()
    pinned = [size[k] != out_size[offset + k] and stretches(size[k], hint) for k in range(len(size))]

    def load(index: Index) -> Any:
        return inner([sympy.Integer(0) if pinned[k] else index[offset + k] for k in range(len(size))])

    return load


_HALF = (torch.float16, torch.bfloat16)


def round_scalar(value: Scalar, dtype: torch.dtype) -> float:
    """A Python number as eager converts it to a half ``dtype`` (through float32, as c10 does)."""
    return float(torch.tensor(float(value), dtype=torch.float32).to(dtype).item())


def _operand_loader(
    value: Any,
    out_size: Sequence[sympy.Expr],
    compute_dtype: torch.dtype,
    half: torch.dtype | None,
    round_scalars: bool,
    hint: Hint | None = None,
) -> Callable[[Index], Any]:
    """A loader of one operand (IR value or scalar) converted to ``compute_dtype``.

    In an op whose dtype is the half ``half`` (computed in float32), eager first casts each operand
    to ``half``: an int64 tensor beyond float16's range is inf, and a Python scalar is rounded
    (``f16 % 0.7`` divides by 0.7002), and so is a 0-d tensor. ``round_scalars=False`` for the ops
    whose eager kernels read a scalar operand (number or 0-d tensor) at float32 precision (mul, div).
    """
    if isinstance(value, IRNode):
        load, src = expand_loader(value, out_size, hint), value.dtype
        # A 0-d tensor of another dtype is rounded as a Python scalar is (`f16 % tensor(0.7)`
        # divides by 0.7002 in eager), and read at full precision where a scalar is (mul, div).
        through_half = half is not None and src != half and (bool(value.get_size()) or round_scalars)

        def load_tensor(index: Index) -> Any:
            if through_half and half is not None:
                return convert(convert(load(index), half, src), compute_dtype, half)
            return convert(load(index), compute_dtype, src)

        return load_tensor

    scalar = value
    if half is not None and round_scalars and isinstance(value, (int, float)) and not isinstance(value, bool):
        scalar = round_scalar(value, half)

    def load_scalar(index: Index) -> Any:
        return const(scalar, compute_dtype)

    return load_scalar


def make_pointwise(
    ctx: LoweringContext,
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    *,
    compute_dtype: torch.dtype,
    result_dtype: torch.dtype | None = None,
    out_dtype: torch.dtype | None = None,
    size: Sequence[sympy.Expr] | None = None,
    round_scalars: bool = True,
) -> Pointwise:
    """A ``Pointwise`` computing ``fn(*operands)`` elementwise over the broadcast of ``inputs``.

    Each input (an IR value or a Python/SymPy scalar) is loaded and converted to
    ``compute_dtype``; ``fn`` returns a value of ``result_dtype`` (default ``compute_dtype``),
    converted to ``out_dtype`` (default ``result_dtype``). Operands of an op whose dtype is
    float16/bfloat16 are first cast to it, as eager's kernels do (see ``_operand_loader``);
    ``round_scalars=False`` spares the second operand only.
    """
    result_dtype = result_dtype or compute_dtype
    out_dtype = out_dtype or result_dtype
    tensors = [v for v in inputs if isinstance(v, IRNode)]
    if not tensors:
        raise NotLowerable("no tensor operand")
    device = tensors[0].device
    if any(t.device != device for t in tensors):
        # e.g. a 0-d CPU tensor in a CUDA op: a kernel cannot read it; ATen handles it.
        raise NotLowerable("operands on several devices")
    out_size = tuple(size) if size is not None else broadcast_shapes(*(t.get_size() for t in tensors), hint=ctx.program.hint)
    op_dtype = promote_dtypes(*inputs)
    half = op_dtype if op_dtype in _HALF and compute_dtype == torch.float32 else None
    inputs = [ctx.broadcast_operand(v, out_size) if isinstance(v, IRNode) else v for v in inputs]
    loaders: list[Callable[[Index], Any]] = []
    for position, value in enumerate(inputs):
        # Eager reads a scalar at float32 precision only as the second operand (`x * t`, not `t * x`).
        rounded = round_scalars or position == 0
        loaders.append(_operand_loader(value, out_size, compute_dtype, half, rounded, ctx.program.hint))

    def inner_fn(index: Index) -> Any:
        result = fn(*[load(index) for load in loaders])
        return convert(result, out_dtype, result_dtype)

    return Pointwise(inner_fn, out_size, out_dtype, device, (ctx.origin,))
