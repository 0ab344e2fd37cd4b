"""How each torch dtype lives in generated C++: storage type, scalar and vector compute types."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["CppDtype", "cpp_constant", "cpp_dtype"]


@dataclass(frozen=True)
class CppDtype:
    """C++ types for one torch dtype.

    storage: the element type of tensor pointers (``kiln::half`` for float16);
    scalar: the type values are computed in (``float`` for float16, ``int32_t`` for int8);
    vector: the ``kiln`` vector type of the compute type (``kiln::maskx`` for bool);
    compute: the torch dtype of the compute type (values of dtypes with the same compute dtype
    share C++ types, and casts between them only round).
    """

    storage: str
    scalar: str
    vector: str
    compute: torch.dtype


_TABLE: dict[torch.dtype, CppDtype] = {
    torch.float32: CppDtype("float", "float", "kiln::f32x", torch.float32),
    torch.float64: CppDtype("double", "double", "kiln::f64x", torch.float64),
    torch.float16: CppDtype("kiln::half", "float", "kiln::f32x", torch.float32),
    torch.bfloat16: CppDtype("kiln::bfloat16", "float", "kiln::f32x", torch.float32),
    torch.int64: CppDtype("int64_t", "int64_t", "kiln::i64x", torch.int64),
    torch.int32: CppDtype("int32_t", "int32_t", "kiln::i32x", torch.int32),
    torch.int16: CppDtype("int16_t", "int32_t", "kiln::i32x", torch.int32),
    torch.int8: CppDtype("int8_t", "int32_t", "kiln::i32x", torch.int32),
    torch.uint8: CppDtype("uint8_t", "int32_t", "kiln::i32x", torch.int32),
    torch.bool: CppDtype("bool", "bool", "kiln::maskx", torch.bool),
}


class UnsupportedDtypeError(TypeError):
    """A dtype the C++ backend has no C++ type for (complex, float8, ...)."""


def cpp_dtype(dtype: torch.dtype) -> CppDtype:
    """The C++ types of ``dtype``; raises :class:`UnsupportedDtypeError` for others."""
    try:
        return _TABLE[dtype]
    except KeyError:
        supported = ", ".join(str(d).removeprefix("torch.") for d in _TABLE)
        raise UnsupportedDtypeError(
            f"the C++ backend does not support {dtype}; supported dtypes: {supported}"
        ) from None


def _float_literal(value: float, scalar: str) -> str:
    if math.isnan(value):
        return f"std::numeric_limits<{scalar}>::quiet_NaN()"
    if math.isinf(value):
        sign = "-" if value < 0 else ""
        return f"{sign}std::numeric_limits<{scalar}>::infinity()"
    text = repr(float(value))
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f" if scalar == "float" else text


def cpp_constant(value: bool | int | float, dtype: torch.dtype) -> str:
    """A scalar C++ literal of ``dtype``'s compute type (``1.5f``, ``INT64_C(7)``, ``true``)."""
    info = cpp_dtype(dtype)
    if dtype == torch.bool:
        return "true" if value else "false"
    if dtype.is_floating_point:
        return _float_literal(float(value), info.scalar)
    as_int = int(value)
    if info.scalar == "int64_t":
        # int64's minimum cannot be written as a negated literal (9223372036854775808 does not fit).
        return "(-INT64_C(9223372036854775807) - 1)" if as_int == -(2**63) else f"INT64_C({as_int})"
    return f"static_cast<{info.scalar}>({as_int})"
