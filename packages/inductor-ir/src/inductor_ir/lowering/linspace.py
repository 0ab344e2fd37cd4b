"""``aten.linspace`` as eager's kernels compute it, bit for bit.

ATen's kernels (CPU, and CUDA for floating dtypes) work in the output's floating type ``T``:
``start`` and ``end`` converted to ``T``, ``step = (end - start) / (steps - 1)`` with the divisor
converted to ``T``, and element ``i`` counted from the nearer end: ``start + step * i`` below
``steps // 2``, ``end - step * (steps - 1 - i)`` from there on, the count converted to ``T``. Both
kernels are compiled with floating-point contraction (g++'s default for GNU C++ on an FMA ISA,
nvcc's default), so every element is one fused multiply-add, rounded once, except in x86's DEFAULT
CPU build (``ATEN_CPU_CAPABILITY=default``, or a CPU without AVX2), which has no FMA and rounds the
product first (`_eager_fuses`). There is no special case for the endpoints (``linspace(-inf, inf, 5)``
is all NaN). Integer dtypes: ``T`` is float64 on the CPU, float32 on CUDA, and the result is
truncated. float16 and bfloat16: each operation (the divisor and the count converted to the dtype
too) is rounded to the dtype, as c10's half arithmetic rounds every result, so nothing fuses.

Kernels here round every product (``-ffp-contract=off`` in C++) and the ops have no fused
multiply-add, so the lowering builds the once-rounded result from operations that are exact or
rounded once (torch's decomposition, ``start + step * i`` rounded twice, gave eager's bits for 80% of
float32 and 85% of float64 elements on a grid of cases):

* float32: in float64 the product of two float32 numbers is exact, and the sum rounded to float64
  and then to float32 is rounded twice. That differs from rounding once only where the float64 sum
  is a tie between two float32 numbers; the sum's error (`_two_sum`, exact) says which way the exact
  value lies (`_past_tie`).
* float64: ``step``, split into two halves of 26 and 27 bits, times the count gives two exact
  products; the three terms are summed keeping each error, and the last rounding's tie is broken
  the same way.

Where plain arithmetic is exact already (every float64 sum of an end and a product is exact, as for
a float32 ``linspace(-2, 2, 7)``, or every float64 product, as for a float64 ``linspace(0, 1, 5)``),
the kernel computes just that. Every multiplication here is exact, so a backend that contracts a product and a sum (Triton on
a GPU) computes the same values. A symbolic number of steps, complex dtypes and ranges of 2**26
elements or more computed in float64 run ATen's kernel (a fallback).
"""

from __future__ import annotations

import math
import platform
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.nodes import Pointwise
from inductor_ir.lowering.common import convert, round_scalar, wrap_int
from inductor_ir.lowering.creation import full
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import sympify_int

aten = torch.ops.aten
Index = Sequence[sympy.Expr]
Body = Callable[[Index], Any]

_F32, _F64, _I64 = torch.float32, torch.float64, torch.int64
_SPLIT_BITS = 27
"""The low half of a float64 step has this many bits (the high half the other 26): each half times a
count below 2**26 is exact."""


@lowering(aten.linspace.default)
def linspace(ctx: LoweringContext, start: Any, end: Any, steps: Any, *, dtype: torch.dtype | None = None,
             layout: Any = None, device: Any = None, pin_memory: Any = None) -> Pointwise:  # fmt: skip
    """``steps`` evenly spaced values from ``start`` to ``end``, with eager's bits (module docstring)."""
    out = ctx.out_dtype(dtype or torch.get_default_dtype())
    count = sympify_int(steps)
    if not count.is_number:
        raise NotLowerable("linspace with a symbolic number of steps")
    if not all(isinstance(v, (int, float)) for v in (start, end)):
        raise NotLowerable("linspace of symbolic or tensor ends")
    if out.is_complex or out == torch.bool:
        raise NotLowerable(f"linspace of {out}")
    n = int(count)
    place = torch.device(device) if device is not None else torch.device("cpu")
    if place.type not in ("cpu", "cuda"):
        raise NotLowerable(f"linspace on {place.type}")
    if n <= 1:  # eager fills the one element with start
        return full(ctx, [n], start, dtype=out, device=device)
    fused = _eager_fuses(place.type)
    if out in (torch.float16, torch.bfloat16):
        body = _half_body(start, end, n, out)
    elif out == _F32 or (not out.is_floating_point and place.type == "cuda"):
        body = _float32_body(start, end, n, out, fused)
    else:
        if n >= 2**26 and fused:
            raise NotLowerable("linspace computed in float64 with 2**26 elements or more")
        body = _float64_body(start, end, n, out, fused)
    return Pointwise(body, (sympy.Integer(n),), out, str(place), (ctx.origin,))


# -- numbers as eager's kernel computes them, before the loop ----------------------------------------


def _eager_fuses(device_type: str) -> bool:
    """Whether eager's kernel on ``device_type`` rounds ``start + step * i`` once: CUDA's does, and so
    do CPU kernels built for an ISA with FMA (AVX2, AVX-512; Arm has FMA in every build); x86's
    DEFAULT build rounds the product first."""
    if device_type != "cpu":
        return True
    x86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
    return not (x86 and torch.backends.cpu.get_cpu_capability() == "DEFAULT")


def _as_float32(value: float | int) -> float:
    """``value`` converted to float32 once, as C++ converts a double or an int64."""
    source = torch.tensor(value, dtype=_I64 if isinstance(value, int) else _F64)
    return float(source.to(_F32).item())


def _ends(start: float | int, end: float | int, dtype: torch.dtype) -> tuple[float | int, float | int]:
    """``start`` and ``end`` as the kernel reads them: truncated and wrapped into an integer dtype
    (``-20`` is 236 in uint8)."""
    if dtype.is_floating_point:
        return start, end
    return wrap_int(int(start), dtype), wrap_int(int(end), dtype)


def _float32_step(first: float, last: float, steps: int) -> float:
    """``(last - first) / (steps - 1)`` in float32."""
    a, b = (torch.tensor(v, dtype=_F32) for v in (first, last))
    return float(((b - a) / torch.tensor(_as_float32(steps - 1), dtype=_F32)).item())


def _bit_range(value: float) -> tuple[int, int]:
    """Exponents of the lowest and the highest set bit of a finite nonzero ``value``."""
    mantissa, exponent = math.frexp(abs(value))
    digits = int(mantissa * 2**53)
    return exponent - 53 + (digits & -digits).bit_length() - 1, exponent - 1


def _split(value: float) -> tuple[float, float]:
    """``value`` as high + low: its leading 26 bits and the rest (at most 27 bits), both exact."""
    if value == 0 or not math.isfinite(value):
        return value, 0.0
    mantissa, exponent = math.frexp(abs(value))
    digits = int(mantissa * 2**53) >> _SPLIT_BITS << _SPLIT_BITS
    high = math.copysign(math.ldexp(digits, exponent - 53), value)
    return high, value - high


# -- kernel bodies ------------------------------------------------------------------------------


def _from_nearer_end(index: Index, steps: int) -> tuple[Any, Any]:
    """(whether element ``index`` counts from the start, its int64 count from that end)."""
    i = index[0]
    first_half = ops.lt(ops.index_expr(i, _I64), ops.constant(steps // 2, _I64))
    ahead, behind = ops.index_expr(i, _I64), ops.index_expr(sympy.Integer(steps - 1) - i, _I64)
    return first_half, ops.where(first_half, ahead, behind)


def _either(first_half: Any, ahead: float, behind: float, dtype: torch.dtype) -> Any:
    return ops.where(first_half, ops.constant(ahead, dtype), ops.constant(behind, dtype))


def _two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """``(a + b, error)``, with ``a + b`` rounded and ``error`` the exact rest (Knuth's TwoSum)."""
    total = ops.add(a, b)
    b_part = ops.sub(total, a)
    a_part = ops.sub(total, b_part)
    return total, ops.add(ops.sub(a, a_part), ops.sub(b, b_part))


def _past_tie(nearest: Any, offset: Any, across: Any, rest: Any) -> Any:
    """Whether the exact value ``nearest + offset + rest`` rounds to ``across``, not ``nearest``.

    ``nearest`` is the target-precision number nearest ``nearest + offset`` (ties to even),
    ``across`` that sum's other neighbour, ``rest`` a remainder too small to move the sum past a
    midpoint. Only a tie (``offset`` half the gap to ``across``) can go across: when ``rest`` lies
    on ``across``'s side. All float64.
    """
    zero = ops.constant(0.0, _F64)
    tie = ops.logical_and(ops.ne(offset, zero), ops.eq(ops.sub(across, nearest), ops.add(offset, offset)))
    same_side = ops.logical_or(
        ops.logical_and(ops.gt(rest, zero), ops.gt(offset, zero)),
        ops.logical_and(ops.lt(rest, zero), ops.lt(offset, zero)),
    )
    return ops.logical_and(tie, same_side)


def _sum_exact_in_float64(ends: tuple[float, float], step: float, steps: int) -> bool:
    """Whether every sum of an end and ``step`` times a count below ``steps`` fits a float64 exactly
    (float32 operands): the sum's bits span at most 53 places."""
    if step == 0 or not math.isfinite(step):
        return True
    low_step, high_step = _bit_range(step)
    lows, highs = [low_step], [high_step + steps.bit_length()]
    for end in ends:
        if end != 0:
            low, high = _bit_range(end)
            lows.append(low)
            highs.append(high)
    return max(highs) + 1 - min(lows) + 1 <= 53


def _float32_body(start: float | int, end: float | int, steps: int, out: torch.dtype, fused: bool) -> Body:
    """float32 (or, on CUDA, an integer dtype): each element the float32 fused multiply-add (``fused``),
    else the product and the sum each rounded to float32."""
    first, last = (_as_float32(v) for v in _ends(start, end, out))
    step = _float32_step(first, last, steps)
    plain = _sum_exact_in_float64((first, last), step, steps)

    def body(index: Index) -> Any:
        first_half, count = _from_nearer_end(index, steps)
        if not fused:
            origin, slope = _either(first_half, first, last, _F32), _either(first_half, step, -step, _F32)
            return convert(ops.add(origin, ops.mul(slope, convert(count, _F32, _I64))), out, _F32)
        origin, slope = _either(first_half, first, last, _F64), _either(first_half, step, -step, _F64)
        product = ops.mul(slope, convert(convert(count, _F32, _I64), _F64, _F32))  # exact
        if plain:
            return convert(convert(ops.add(origin, product), _F32, _F64), out, _F32)
        total, rest = _two_sum(origin, product)
        nearest32 = ops.to_dtype(total, _F32, _F64)
        nearest = ops.to_dtype(nearest32, _F64, _F32)
        offset = ops.sub(total, nearest)  # exact
        across32 = ops.to_dtype(ops.add(nearest, ops.add(offset, offset)), _F32, _F64)
        across = ops.to_dtype(across32, _F64, _F32)
        value = ops.where(_past_tie(nearest, offset, across, rest), across32, nearest32)
        return convert(value, out, _F32)

    return body


def _float64_body(start: float | int, end: float | int, steps: int, out: torch.dtype, fused: bool) -> Body:
    """float64 (or, on the CPU, an integer dtype): each element the float64 fused multiply-add (``fused``),
    else the product and the sum each rounded."""
    first, last = (float(v) for v in _ends(start, end, out))
    step = (last - first) / float(steps - 1)
    high, low = _split(step)
    plain = not fused or low == 0 or not math.isfinite(step) or _significant_bits(step) + steps.bit_length() <= 53

    def body(index: Index) -> Any:
        first_half, count = _from_nearer_end(index, steps)
        origin = _either(first_half, first, last, _F64)
        n = convert(count, _F64, _I64)
        if plain:  # every product exact (or eager's rounded too)
            return convert(ops.add(origin, ops.mul(_either(first_half, step, -step, _F64), n)), out, _F64)
        head, tail = _two_sum(origin, ops.mul(_either(first_half, high, -high, _F64), n))
        rest, rest_error = _two_sum(tail, ops.mul(_either(first_half, low, -low, _F64), n))
        total, offset = _two_sum(head, rest)
        across = ops.add(total, ops.add(offset, offset))
        nearest = ops.where(_past_tie(total, offset, across, rest_error), across, total)
        # Nothing beyond head: head is the sum, also a zero's sign (-0.0 + -0.0 where rest is +0.0).
        value = ops.where(ops.eq(rest, ops.constant(0.0, _F64)), head, nearest)
        return convert(value, out, _F64)

    return body


def _significant_bits(value: float) -> int:
    low, high = _bit_range(value)
    return high - low + 1


def _half_body(start: float | int, end: float | int, steps: int, out: torch.dtype) -> Body:
    """float16/bfloat16: every operation rounded to the dtype (computed in float32)."""
    first, last = round_scalar(start, out), round_scalar(end, out)
    step = round_scalar(round_scalar(last - first, out) / round_scalar(steps - 1, out), out)

    def rounded(value: Any) -> Any:
        return convert(convert(value, out, _F32), _F32, out)

    def body(index: Index) -> Any:
        first_half, count = _from_nearer_end(index, steps)
        origin, slope = _either(first_half, first, last, _F32), _either(first_half, step, -step, _F32)
        product = rounded(ops.mul(slope, rounded(convert(count, _F32, _I64))))
        return convert(ops.add(origin, product), out, _F32)

    return body
