"""Stand-ins for `libdevice` under `TRITON_INTERPRET=1` (the interpreter has no libdevice).

Generated kernels call `libdevice.<name>(...)` for math that `triton.language` lacks. On a GPU the
kernel module imports `triton.language.extra.libdevice`; under the interpreter it imports this module
instead. Each function here computes with NumPy on the interpreter's tensor data: the interpreter
executes kernels as plain Python over NumPy arrays, so this is exact and needs no approximation.
Only ever used for CPU testing; never imported by a GPU kernel.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import triton.language as tl

__all__ = [
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "copysign",
    "cosh",
    "erfc",
    "exp",
    "expm1",
    "fmod",
    "hypot",
    "isinf",
    "isnan",
    "lgamma",
    "log1p",
    "log10",
    "loop_bound",
    "nearbyint",
    "nextafter",
    "pow",
    "round_to_bfloat16",
    "signbit",
    "sinh",
    "tan",
    "tanh",
    "to_bfloat16",
    "trunc",
]


def _handle_cls() -> Any:
    from triton.runtime.interpreter import TensorHandle

    return TensorHandle


def _wrap(data: np.ndarray, scalar: Any) -> Any:
    handle = _handle_cls()(np.asarray(data), scalar)
    shape = list(np.shape(data))
    ty = tl.block_type(scalar, shape) if shape else scalar
    return tl.core.tensor(handle, ty)


def _data(value: Any) -> Any:
    return value.handle.data if isinstance(value, tl.core.tensor) else value


def _scalar_of(value: Any) -> Any:
    return value.type.scalar if isinstance(value, tl.core.tensor) else tl.float32


def _unary(fn: Callable[[np.ndarray], np.ndarray], *, boolean: bool = False) -> Callable[[Any], Any]:
    def apply(x: Any) -> Any:
        data = _data(x)
        with np.errstate(all="ignore"):
            out = fn(data)
        if boolean:
            return _wrap(np.asarray(out, dtype=np.bool_), tl.int1)
        return _wrap(np.asarray(out, dtype=np.asarray(data).dtype), _scalar_of(x))

    return apply


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Any, Any], Any]:
    def apply(x: Any, y: Any) -> Any:
        reference = x if isinstance(x, tl.core.tensor) else y
        np_dtype = np.asarray(_data(reference)).dtype
        with np.errstate(all="ignore"):
            out = fn(np.asarray(_data(x), dtype=np_dtype), np.asarray(_data(y), dtype=np_dtype))
        return _wrap(np.asarray(out, dtype=np_dtype), _scalar_of(reference))

    return apply


def _safe_lgamma(value: float) -> float:
    import math

    try:
        return math.lgamma(value)
    except (ValueError, OverflowError):
        return math.inf


def _lgamma(data: np.ndarray) -> np.ndarray:
    result: np.ndarray = np.vectorize(_safe_lgamma, otypes=[np.asarray(data).dtype])(data)
    return result


def _erfc(data: np.ndarray) -> np.ndarray:
    import math

    result: np.ndarray = np.vectorize(math.erfc, otypes=[np.asarray(data).dtype])(data)
    return result


tanh = _unary(np.tanh)
tan = _unary(np.tan)
sinh = _unary(np.sinh)
cosh = _unary(np.cosh)
asin = _unary(np.arcsin)
acos = _unary(np.arccos)
atan = _unary(np.arctan)
asinh = _unary(np.arcsinh)
acosh = _unary(np.arccosh)
atanh = _unary(np.arctanh)
exp = _unary(np.exp)
expm1 = _unary(np.expm1)
log1p = _unary(np.log1p)
trunc = _unary(np.trunc)
nearbyint = _unary(np.rint)
lgamma = _unary(_lgamma)
erfc = _unary(_erfc)
isnan = _unary(np.isnan, boolean=True)
isinf = _unary(np.isinf, boolean=True)
signbit = _unary(np.signbit, boolean=True)
pow = _binary(np.power)
atan2 = _binary(np.arctan2)
fmod = _binary(np.fmod)
hypot = _binary(np.hypot)
copysign = _binary(np.copysign)
nextafter = _binary(np.nextafter)
log10 = _unary(np.log10)


def _bfloat16_bits(data: np.ndarray) -> np.ndarray:
    """The float32 bit patterns of `data` rounded to bfloat16 (to nearest, ties to even), low half 0.

    The interpreter's own float32 -> bfloat16 cast truncates (and mangles subnormals), where a GPU
    and eager round to nearest even.
    """
    values = np.asarray(data, dtype=np.float32)
    bits = values.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return np.where(np.isnan(values), values.view(np.uint32) | 0x00400000, rounded).astype(np.uint32)


def round_to_bfloat16(x: Any) -> Any:
    """A float32 value rounded to bfloat16 as a GPU rounds it, held in float32."""
    return _wrap(_bfloat16_bits(_data(x)).view(np.float32), tl.float32)


def to_bfloat16(x: Any) -> Any:
    """A float32 value converted to bfloat16 (to nearest even), ready to store to a bfloat16 pointer."""
    return _wrap((_bfloat16_bits(_data(x)) >> 16).astype(np.uint16), tl.bfloat16)


def loop_bound(value: Any) -> int:
    """A Python int for a `range()` bound: the interpreter holds scalar arguments as 1-element arrays."""
    data = _data(value)
    return int(np.asarray(data).reshape(-1)[0])
