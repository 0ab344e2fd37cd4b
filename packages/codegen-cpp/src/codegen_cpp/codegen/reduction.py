"""C++ for ``ops.reduction``: accumulator declarations, per-element updates, the final combine.

A reduction loop with a vector part keeps two accumulators: ``accN_vec`` (one partial result per
lane, updated by the vector loop) and ``accN`` (updated by the scalar tail); after the loop the
lanes are reduced horizontally and combined with the scalar one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy
import torch

from codegen_cpp.codegen.dtypes import cpp_dtype
from codegen_cpp.codegen.printer import cpp_index

if TYPE_CHECKING:
    from codegen_cpp.codegen.handler import CppOpsHandler, CppValue

__all__ = ["combine_partial", "emit_reduction"]

_HORIZONTAL = {
    "sum": "kiln::hsum",
    "prod": "kiln::hprod",
    "max": "kiln::hmax",
    "min": "kiln::hmin",
    "any": "kiln::hany",
}


def _identity(reduction_type: str, scalar: str) -> str:
    return {
        "sum": f"static_cast<{scalar}>(0)",
        "prod": f"static_cast<{scalar}>(1)",
        "max": f"kiln::max_identity<{scalar}>()",
        "min": f"kiln::min_identity<{scalar}>()",
        "any": "false",
    }[reduction_type]


LONG_REDUCTION = 16384  # longer float sums (or symbolic ones) accumulate in double lanes


def _long(handler: CppOpsHandler) -> bool:
    """Whether the reduction is long enough for float lanes to lose accuracy (n / 16 adds each)."""
    size = sympy.Mul(*handler.reduction_sizes) if handler.reduction_sizes else sympy.Integer(1)
    return not (size.is_Integer and int(size) <= LONG_REDUCTION)


def _scalar_accumulator(reduction_type: str, scalar: str) -> str:
    """The C++ type a scalar accumulator uses: float sums run in double (one rounding at the end)."""
    return "double" if reduction_type == "sum" and scalar == "float" else scalar


def combine_partial(reduction_type: str, acc: str, partial: str, vector: bool) -> str:
    """The line folding one thread's partial accumulator into the shared one."""
    return _update(reduction_type, acc, partial, vector)


def _update(reduction_type: str, acc: str, value: str, vector: bool) -> str:
    if reduction_type == "sum":
        return f"{acc} = {acc} + {value};"
    if reduction_type == "prod":
        return f"{acc} = {acc} * {value};"
    if reduction_type == "max":
        return f"{acc} = kiln::maximum({acc}, {value});"
    if reduction_type == "min":
        return f"{acc} = kiln::minimum({acc}, {value});"
    if reduction_type == "any":
        return f"{acc} = {acc} {'|' if vector else '||'} {value};"
    raise NotImplementedError(f"reduction type {reduction_type!r} is not supported by the C++ backend")


def _combine(reduction_type: str, scalar: str, vector: str) -> str:
    horizontal = f"{_HORIZONTAL[reduction_type]}({vector})"
    if reduction_type == "sum":
        return f"{scalar} + {horizontal}"
    if reduction_type == "prod":
        return f"{scalar} * {horizontal}"
    if reduction_type == "max":
        return f"kiln::maximum({scalar}, {horizontal})"
    if reduction_type == "min":
        return f"kiln::minimum({scalar}, {horizontal})"
    return f"({scalar} || {horizontal})"


def _linear_reduction_index(handler: CppOpsHandler) -> str:
    """Row-major linear index over the reduction range (lane 0's in vector code)."""
    index: sympy.Expr = sympy.Integer(0)
    stride: sympy.Expr = sympy.Integer(1)
    for var, size in reversed(list(zip(handler.reduction_vars, handler.reduction_sizes))):
        index += var * stride
        stride *= size
    return cpp_index(sympy.expand(index))


def emit_reduction(
    handler: CppOpsHandler, key: tuple[str, int], dtype: torch.dtype, reduction_type: str, value: CppValue
) -> CppValue:
    """Emit one reduction's accumulator, update and (scalar run) final value; return the result value."""
    from codegen_cpp.codegen.handler import CppValue

    state, scope = handler.state, handler.scope
    acc = state.accumulators.setdefault(key, state.fresh("acc"))
    vec_acc = f"{acc}_vec"
    is_arg = reduction_type in ("argmax", "argmin")
    value_dtype = value.dtype if is_arg else dtype
    if not is_arg and cpp_dtype(value.dtype).scalar != cpp_dtype(dtype).scalar:
        value = handler.to_dtype(value, dtype, value.dtype)
    info = cpp_dtype(value_dtype)
    text = handler._lift(value)
    is_max = "true" if reduction_type == "argmax" else "false"
    target = handler._target
    if handler.outer:
        return _emit_outer(handler, vec_acc, dtype, reduction_type, text, info.vector, is_max)
    if handler.vector:
        if vec_acc not in state.vector_accumulators:
            state.vector_accumulators.add(vec_acc)
            if is_arg:
                scope.pre.append(f"auto {vec_acc} = kiln::arg_init_vec<{info.vector}>({is_max});")
            elif reduction_type == "any":
                scope.pre.append(f"kiln::maskx {vec_acc} = kiln::splat_mask(false);")
            elif reduction_type == "sum" and info.vector == "kiln::f32x" and _long(handler):
                scope.pre.append(f"kiln::f64x {vec_acc} = kiln::splat<kiln::f64x>(0.0);")
            else:
                identity = _identity(reduction_type, info.scalar)
                scope.pre.append(f"{info.vector} {vec_acc} = kiln::splat<{info.vector}>({identity});")
        if is_arg:
            target.append(
                f"kiln::arg_update_vec({is_max}, {vec_acc}, {text}, {_linear_reduction_index(handler)});"
            )
        else:
            if reduction_type == "sum" and info.vector == "kiln::f32x" and _long(handler):
                # Long float sums accumulate in double lanes: they stay as exact as eager's.
                text = f"kiln::convert<kiln::f64x>({text})"
            target.append(_update(reduction_type, vec_acc, text, vector=True))
            state.combinable[vec_acc] = (reduction_type, True)
        return CppValue(vec_acc, dtype, True)
    if is_arg:
        scope.pre.append(f"auto {acc} = kiln::arg_init<{info.scalar}>({is_max});")
        target.append(f"kiln::arg_update({is_max}, {acc}, {text}, {_linear_reduction_index(handler)});")
    else:
        acc_type = _scalar_accumulator(reduction_type, info.scalar)
        scope.pre.append(f"{acc_type} {acc} = {_identity(reduction_type, acc_type)};")
        target.append(_update(reduction_type, acc, text, vector=False))
        state.combinable[acc] = (reduction_type, False)
    result = state.fresh("red")
    has_vector = vec_acc in state.vector_accumulators
    if is_arg:
        args = f"{is_max}, {vec_acc}, {acc}" if has_vector else f"{is_max}, {acc}"
        scope.post.append(f"const int64_t {result} = kiln::arg_finish({args});")
    else:
        final = _combine(reduction_type, acc, vec_acc) if has_vector else acc
        scope.post.append(f"const {info.scalar} {result} = static_cast<{info.scalar}>({final});")
    return CppValue(result, dtype, False)


def _emit_outer(
    handler: CppOpsHandler,
    acc: str,
    dtype: torch.dtype,
    reduction_type: str,
    value: str,
    vector: str,
    is_max: str,
) -> CppValue:
    """Vectorized across pointwise indices: each lane is one output's accumulator and result."""
    from codegen_cpp.codegen.handler import CppValue

    scope, target = handler.scope, handler._target
    result = handler.state.fresh("red")
    index = _linear_reduction_index(handler)
    if reduction_type in ("argmax", "argmin"):
        scope.pre.append(f"auto {acc} = kiln::arg_init_vec<{vector}>({is_max});")
        target.append(f"kiln::arg_update_lanes({is_max}, {acc}, {value}, {index});")
        scope.post.append(f"const auto {result} = kiln::arg_result({acc});")
    else:
        if reduction_type == "any":
            scope.pre.append(f"kiln::maskx {acc} = kiln::splat_mask(false);")
            target.append(_update(reduction_type, acc, value, vector=True))
            scope.post.append(f"const auto {result} = {acc};")
        elif reduction_type == "sum" and vector == "kiln::f32x":
            # A long sequential float sum per lane: accumulate in double, round once at the end.
            scope.pre.append(f"kiln::f64x {acc} = kiln::splat<kiln::f64x>(0.0);")
            target.append(_update(reduction_type, acc, f"kiln::convert<kiln::f64x>({value})", vector=True))
            scope.post.append(f"const auto {result} = kiln::convert<kiln::f32x>({acc});")
        else:
            identity = _identity(reduction_type, cpp_dtype(dtype).scalar)
            scope.pre.append(f"{vector} {acc} = kiln::splat<{vector}>({identity});")
            target.append(_update(reduction_type, acc, value, vector=True))
            scope.post.append(f"const auto {result} = {acc};")
    return CppValue(result, dtype, True)
