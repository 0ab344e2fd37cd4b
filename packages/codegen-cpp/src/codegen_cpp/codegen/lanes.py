"""How an index expression moves across the lanes of one vector.

A vector loop over ``v`` starts at 0 and steps by ``VEC`` lanes (16 on CPUs with AVX-512, else 8),
so lane 0's value ``v0`` is a multiple of ``VEC`` and lane ``l`` sees ``v0 + l``. :func:`lane_stride`
proves, where it can, that ``index(v0 + l) == index(v0) + c * l`` for all lanes and returns ``c``: 1
is a contiguous vector load, 0 a broadcast. ``FloorDiv``/``ModularIndexing`` terms (views and
reshapes produce them) count as lane-invariant or lane-linear when their divisors are multiples of
``VEC`` and their bases are multiples of ``VEC`` at lane 0, e.g. ``1024*((64*x0 + x1) // 1024) +
(x1 % 64)`` moves by 1 per lane of ``x1``.

:func:`lane_uniform_sign` proves that a comparison of such indices has one truth value across a
vector: ``(x1 % 32) - 16 >= 0`` (rotary embeddings' ``rotate_half``, a concatenation at a multiple of
``VEC``) holds in all lanes of a vector or in none, so a mask built from it is decided once per vector.

The lane count follows the machine's vector registers: a vector of 16 floats is one AVX-512
register, but on AVX2 it is two, and g++ keeps such a vector that a loop carries (a reduction's
accumulator) in memory, not registers: a row sum over 512 floats ran 8 times slower with 16 lanes
than with 8 on an AVX2 CPU. The generated code and the runtime headers agree through
``-DKILN_VEC=<lanes>`` on every compile (``VECTOR_FLAGS``).
"""

from __future__ import annotations

import sympy

from inductor_ir import FloorDiv, ModularIndexing

__all__ = ["VECTOR_FLAGS", "VECTOR_LANES", "lane_stride", "lane_uniform_sign", "vector_lanes_for"]


def vector_lanes_for(cpu_flags: str) -> int:
    """Lanes per vector for a CPU with these feature flags (``/proc/cpuinfo``'s): 16 with AVX-512, else 8."""
    return 16 if "avx512f" in cpu_flags.split() else 8


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return " ".join(line.split(":", 1)[1] for line in cpuinfo if line.startswith("flags"))
    except OSError:
        return ""


VECTOR_LANES = vector_lanes_for(_cpu_flags())  # kiln::VEC in kiln_cpu.h
VECTOR_FLAGS = (f"-DKILN_VEC={VECTOR_LANES}",)
"""The compile flag that gives the runtime headers the same lane count as the generated code."""


def _multiple_at_lane0(expr: sympy.Expr, var: sympy.Symbol, lanes: int) -> bool:
    """Whether ``expr`` is a multiple of ``lanes`` whenever ``var`` is (every term's coefficient is)."""
    q = sympy.Symbol("kiln_block", integer=True, nonnegative=True)
    shifted = sympy.expand(expr.xreplace({var: lanes * q}))
    for term in sympy.Add.make_args(shifted):
        coeff, _ = term.as_coeff_Mul()
        if not (coeff.is_Integer and int(coeff) % lanes == 0):
            return False
    return True


def _divides(divisor: sympy.Expr, lanes: int) -> bool:
    return bool(divisor.is_Integer) and int(divisor) % lanes == 0


def lane_stride(expr: sympy.Expr, var: sympy.Symbol, lanes: int = VECTOR_LANES) -> sympy.Expr | None:
    """``c`` with ``expr(v0 + l) == expr(v0) + c*l`` for lanes ``l < lanes`` (``v0 % lanes == 0``), or None."""
    if not expr.has(var):
        return sympy.Integer(0)
    if expr == var:
        return sympy.Integer(1)
    if isinstance(expr, sympy.Add):
        total: sympy.Expr = sympy.Integer(0)
        for term in expr.args:
            stride = lane_stride(term, var, lanes)
            if stride is None:
                return None
            total += stride
        return sympy.expand(total)
    if isinstance(expr, sympy.Mul):
        moving = [f for f in expr.args if f.has(var)]
        if len(moving) != 1:
            return None
        inner = lane_stride(moving[0], var, lanes)
        if inner is None:
            return None
        constant = sympy.Mul(*[f for f in expr.args if not f.has(var)])
        return sympy.expand(constant * inner)
    if isinstance(expr, FloorDiv | ModularIndexing) and lane_stride(expr.args[0], var, lanes) == 0:
        return sympy.Integer(0)  # the base is the same in every lane
    if isinstance(expr, FloorDiv):
        base, divisor = expr.args
        if (
            lane_stride(base, var, lanes) == 1
            and _divides(divisor, lanes)
            and _multiple_at_lane0(base, var, lanes)
        ):
            return sympy.Integer(0)  # base + l never crosses a multiple of the divisor
        return None
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = expr.args
        if lane_stride(base, var, lanes) != 1 or not _multiple_at_lane0(base, var, lanes):
            return None
        if divisor == 1 and _divides(modulus, lanes):
            return sympy.Integer(1)  # (b + l) % m == b % m + l: b % m is a multiple of VEC below m
        if _divides(divisor, lanes):
            return sympy.Integer(0)
        return None
    return None


def _always_multiple(expr: sympy.Expr, k: int) -> bool:
    """Whether the integer ``expr`` is a multiple of ``k`` for every value of its (integer) symbols.

    Structural, so a False means "not proven": integers divisible by ``k``; sums of multiples; a
    product with a factor that is a multiple (the others integers); ``X % m`` with ``X`` and ``m``
    multiples of ``k`` (``X - m*(X // m)``); ``(X // d) % m`` and ``X // d`` with ``X`` a multiple of
    ``k*d`` (``X == k*d*j`` gives ``X // d == k*j``).
    """
    if expr.is_Integer:
        return int(expr) % k == 0
    if isinstance(expr, sympy.Add):
        return all(_always_multiple(term, k) for term in expr.args)
    if isinstance(expr, sympy.Mul):
        return all(_is_integer(f) for f in expr.args) and any(_always_multiple(f, k) for f in expr.args)
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = expr.args
        return (
            divisor.is_Integer
            and int(divisor) > 0
            and modulus.is_Integer
            and int(modulus) % k == 0
            and _always_multiple(base, k * int(divisor))
        )
    if isinstance(expr, FloorDiv):
        base, divisor = expr.args
        return divisor.is_Integer and int(divisor) > 0 and _always_multiple(base, k * int(divisor))
    return False


def _is_integer(expr: sympy.Expr) -> bool:
    return bool(expr.is_Integer or isinstance(expr, FloorDiv | ModularIndexing) or (expr.is_Symbol and expr.is_integer))


def lane_uniform_sign(expr: sympy.Expr, var: sympy.Symbol, lanes: int = VECTOR_LANES) -> bool:
    """Whether ``expr >= 0`` has the same truth value in every lane of a vector over ``var``.

    Lane ``l`` sees ``t(v0 + l)`` with ``v0 = lanes*q``. Proven in two cases: ``t`` is the same in
    every lane (stride 0), or it moves by +-1 per lane from a lane-0 value on the right side of a
    multiple of ``lanes``. By +1 from ``t(v0) == lanes*j``: ``t(v0) + l`` is ``>= 0`` for all ``l``
    when ``j >= 0`` and ``<= -1`` for all ``l < lanes`` when ``j < 0``. By -1, the same for
    ``-t - 1`` (``t >= 0`` is ``-t - 1 < 0``).

    Example (16 lanes):
        >>> x1 = sympy.Symbol("x1", integer=True, nonnegative=True)
        >>> lane_uniform_sign(ModularIndexing(x1, 1, 32) - 16, x1, 16)
        True
        >>> lane_uniform_sign(ModularIndexing(x1, 1, 24) - 12, x1, 16)
        False
    """
    stride = lane_stride(expr, var, lanes)
    if stride == 0:
        return True
    if stride == -1:
        expr, stride = sympy.expand(-expr - 1), sympy.Integer(1)
    if stride != 1:
        return False
    block = sympy.Symbol("kiln_block", integer=True, nonnegative=True)
    return _always_multiple(sympy.expand(expr.xreplace({var: lanes * block})), lanes)
