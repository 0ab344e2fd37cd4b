"""Values of a kernel being written: a variable name, its dtype, and the block axes it varies along."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["TritonValue", "compute_dtype", "is_float", "triton_type", "wrapped_in_int32"]

_TRITON_TYPES: dict[torch.dtype, str] = {
    torch.float32: "tl.float32",
    torch.float16: "tl.float16",
    torch.bfloat16: "tl.bfloat16",
    torch.float64: "tl.float64",
    torch.int8: "tl.int8",
    torch.int16: "tl.int16",
    torch.int32: "tl.int32",
    torch.int64: "tl.int64",
    torch.uint8: "tl.uint8",
    torch.bool: "tl.int1",
}


def triton_type(dtype: torch.dtype) -> str:
    """The `tl.*` type name for a torch dtype; raises a clear error for unsupported ones."""
    try:
        return _TRITON_TYPES[dtype]
    except KeyError:
        raise NotImplementedError(
            f"the Triton backend does not support dtype {dtype}; convert the tensor to a supported dtype "
            f"({', '.join(str(d) for d in _TRITON_TYPES)})"
        ) from None


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a value is held in registers: float16/bfloat16 are computed in float32."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def wrapped_in_int32(expr: str, dtype: torch.dtype) -> str:
    """``expr`` (exact in int32) wrapped into the range of the narrow ``dtype`` by arithmetic, and kept
    in int32: an int8/int16 value that arithmetic made is held in an int32 register (loads and
    stores convert). On a GPU (Triton 3.6, H200), a wrapped result narrowed to int16 and widened
    again lost its wrap (-(-32768) widened to int64 as +32768, whether computed on uint16 bit
    patterns or truncated from int32): the narrowing cast is never written."""
    bits = torch.iinfo(dtype).bits
    half, mask = 1 << (bits - 1), (1 << bits) - 1
    return f"((({expr}) + {half}) & {mask}) - {half}"


def is_float(dtype: torch.dtype) -> bool:
    """Whether `dtype` is a floating dtype."""
    return dtype.is_floating_point


@dataclass(frozen=True)
class TritonValue:
    """A value in the kernel being generated.

    Attributes:
        name: the Triton variable (or expression) holding it.
        dtype: its logical dtype (what torch would have); float16/bfloat16 are held as float32.
        axes: the block axes ("x", "y", "r") it varies along; empty for a per-program scalar.
    """

    name: str
    dtype: torch.dtype
    axes: frozenset[str] = frozenset()

    def __str__(self) -> str:
        return self.name
