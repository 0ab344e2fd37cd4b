"""Simplifying index expressions with the ranges of the loop variables.

Views and reshapes leave ``FloorDiv``/``ModularIndexing`` terms that only the loop bounds make
simple: with ``0 <= x1 < 128``, ``(128*x0 + x1) // 8192`` is ``x0 // 64`` and ``(x1 // 128)`` is
0. Simplified, an index more often moves by 1 per lane (a vector load instead of a gather),
costs fewer divisions per element, and lets adjacent dims merge into one loop.

The rules, for nonnegative terms whose bounds are known:
- ``(g*A + B) // d == A // (d/g)`` when ``g`` divides ``d`` and ``0 <= B < g``;
- ``X // d == 0`` when ``0 <= X < d``; ``X % m == X`` when ``0 <= X < m``;
- terms that are multiples of ``d`` (of ``m``) leave the division (drop out of the modulo).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import sympy

from inductor_ir import FloorDiv, ModularIndexing

__all__ = ["Ranges", "simplify_index", "upper_bound"]

Ranges = Mapping[sympy.Symbol, sympy.Expr]  # variable -> its size (the variable lies in [0, size))


def upper_bound(expr: sympy.Expr, ranges: Ranges) -> int | None:
    """The largest value ``expr`` takes, when it is a nonnegative combination of bounded terms."""
    if expr.is_Integer:
        return int(expr) if int(expr) >= 0 else None
    if isinstance(expr, sympy.Symbol):
        size = ranges.get(expr)
        return int(size) - 1 if size is not None and size.is_Integer else None
    if isinstance(expr, sympy.Add):
        total = 0
        for term in expr.args:
            bound = upper_bound(term, ranges)
            if bound is None:
                return None
            total += bound
        return total
    if isinstance(expr, sympy.Mul):
        coeff, rest = expr.as_coeff_Mul()
        if not (coeff.is_Integer and int(coeff) >= 0):
            return None
        if rest == expr:  # no numeric coefficient (x0*s1): the product of its factors' bounds
            product = 1
            for factor in sympy.Mul.make_args(expr):
                bound = upper_bound(factor, ranges)
                if bound is None:
                    return None
                product *= bound
            return product
        bound = upper_bound(rest, ranges)
        return None if bound is None else int(coeff) * bound
    if isinstance(expr, FloorDiv) and expr.args[1].is_Integer:
        bound = upper_bound(expr.args[0], ranges)
        return None if bound is None else bound // int(expr.args[1])
    if isinstance(expr, ModularIndexing) and expr.args[2].is_Integer:
        bound = upper_bound(FloorDiv(expr.args[0], expr.args[1]), ranges)
        limit = int(expr.args[2]) - 1
        return limit if bound is None else min(bound, limit)
    return None


def _coefficient(term: sympy.Expr) -> int | None:
    coeff, _ = term.as_coeff_Mul()
    return int(coeff) if coeff.is_Integer else None


def _floordiv(base: sympy.Expr, divisor: int, ranges: Ranges) -> sympy.Expr:
    """``base // divisor`` simplified with the ranges."""
    if divisor == 1:
        return base
    bound = upper_bound(base, ranges)
    if bound is not None and bound < divisor:
        return sympy.Integer(0)
    terms = sympy.Add.make_args(sympy.expand(base))
    whole = [t for t in terms if (c := _coefficient(t)) is not None and c % divisor == 0]
    rest = [t for t in terms if t not in whole]
    if whole:
        taken = sympy.Add(*[sympy.cancel(t / divisor) for t in whole])
        return taken + _floordiv(sympy.Add(*rest), divisor, ranges)
    # (g*A + B) // d == A // (d/g) with g | d and 0 <= B < g: try the largest such g.
    coefficients = {abs(c) for t in terms if (c := _coefficient(t)) is not None}
    for g in sorted({math.gcd(c, divisor) for c in coefficients if c}, reverse=True):
        if g < 2:
            continue
        big = [t for t in terms if (c := _coefficient(t)) is not None and c % g == 0]
        small = sympy.Add(*[t for t in terms if t not in big])
        small_bound = upper_bound(small, ranges)
        if not big or small_bound is None or small_bound >= g:
            continue
        # floor((g*A + B) / d) == floor((A + B/g) / (d/g)) == A // (d/g): A is an integer, B/g in [0, 1)
        reduced = sympy.Add(*[sympy.cancel(t / g) for t in big])
        return _floordiv(reduced, divisor // g, ranges)
    return FloorDiv(base, sympy.Integer(divisor))


def _modulo(base: sympy.Expr, modulus: int, ranges: Ranges) -> sympy.Expr:
    """``base % modulus`` (base nonnegative) simplified with the ranges."""
    terms = [t for t in sympy.Add.make_args(sympy.expand(base)) if not ((c := _coefficient(t)) is not None and c % modulus == 0)]
    kept = sympy.Add(*terms)
    bound = upper_bound(kept, ranges)
    if bound is not None and bound < modulus:
        return kept
    return ModularIndexing(kept, sympy.Integer(1), sympy.Integer(modulus))


def _simplify(expr: sympy.Expr, ranges: Ranges) -> sympy.Expr:
    if not expr.args or expr.is_Atom:
        return expr
    args = [_simplify(a, ranges) for a in expr.args]
    # Both rules hold for any integer base (floor division and floor modulo), so no sign checks.
    if isinstance(expr, FloorDiv):
        base, divisor = args
        if divisor.is_Integer and int(divisor) > 0:
            return _floordiv(base, int(divisor), ranges)
        if divisor.is_positive:
            return _floordiv_symbolic(base, divisor, ranges)
        return FloorDiv(base, divisor)
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = args
        if divisor.is_Integer and modulus.is_Integer and int(divisor) > 0 and int(modulus) > 0:
            return _modulo(_floordiv(base, int(divisor), ranges), int(modulus), ranges)
        if divisor.is_positive and modulus.is_positive:
            quotient = _floordiv(base, int(divisor), ranges) if divisor.is_Integer else _floordiv_symbolic(base, divisor, ranges)
            return _modulo_symbolic(quotient, modulus, ranges)
        return ModularIndexing(base, divisor, modulus)
    return expr.func(*args)


def _multiple_of(term: sympy.Expr, divisor: sympy.Expr) -> sympy.Expr | None:
    """``term / divisor`` when it is a polynomial (``term`` a multiple of ``divisor``), else None.

    Cheap refusals first: a term without all of the divisor's symbols is no multiple of it, and
    polynomial division of terms holding ``Max``/``Min`` (SAME padding sizes) or of large ones runs
    for minutes in SymPy; such a division is left in the index (correct, a little slower).
    """
    if not divisor.free_symbols <= term.free_symbols:
        return None
    if term.has(sympy.Max, sympy.Min) or divisor.has(sympy.Max, sympy.Min):
        factors = list(sympy.Mul.make_args(term))
        if divisor in factors:
            factors.remove(divisor)  # one occurrence, by equality
            return sympy.Mul(*factors) if factors else sympy.Integer(1)
        return None
    if sympy.count_ops(term) + sympy.count_ops(divisor) > _CANCEL_LIMIT:
        return None
    quotient = sympy.cancel(term / divisor)
    _, denominator = sympy.fraction(quotient)
    return quotient if denominator == 1 else None


_CANCEL_LIMIT = 120
"""Operations above which a term is not divided polynomially (see `_multiple_of`)."""


def _floordiv_symbolic(base: sympy.Expr, divisor: sympy.Expr, ranges: Ranges) -> sympy.Expr:
    """``base // divisor`` for a symbolic divisor (dynamic shapes): multiples of ``divisor`` leave
    the division, and ``(g*A + B) // (g*D) == A // D`` when ``0 <= B < g`` (``g`` its integer factor)."""
    terms = sympy.Add.make_args(sympy.expand(base))
    taken = [_multiple_of(t, divisor) for t in terms]
    whole = sympy.Add(*[q for q in taken if q is not None])
    rest = sympy.Add(*[t for t, q in zip(terms, taken) if q is None])
    if rest == 0 or (isinstance(rest, sympy.Symbol) and ranges.get(rest) == divisor):
        return whole  # a variable ranging over [0, divisor) divides to 0
    g, reduced_divisor = divisor.as_coeff_Mul()
    if g.is_Integer and int(g) >= 2:
        big = [t for t in sympy.Add.make_args(rest) if (c := _coefficient(t)) is not None and c % int(g) == 0]
        small = sympy.Add(*[t for t in sympy.Add.make_args(rest) if t not in big])
        small_bound = upper_bound(small, ranges)
        if big and small_bound is not None and small_bound < int(g):
            reduced = sympy.Add(*[sympy.cancel(t / g) for t in big])
            return whole + _floordiv_symbolic(reduced, reduced_divisor, ranges)
    return whole + FloorDiv(rest, divisor)


def _modulo_symbolic(base: sympy.Expr, modulus: sympy.Expr, ranges: Ranges) -> sympy.Expr:
    """``base % modulus`` for a symbolic modulus: multiples of it drop out; a variable whose range
    is the modulus itself is its own remainder."""
    if modulus.is_Integer:
        return _modulo(base, int(modulus), ranges)
    kept = sympy.Add(*[t for t in sympy.Add.make_args(sympy.expand(base)) if _multiple_of(t, modulus) is None])
    if isinstance(kept, sympy.Symbol) and ranges.get(kept) == modulus:
        return kept
    if kept == 0:
        return sympy.Integer(0)
    return ModularIndexing(kept, sympy.Integer(1), modulus)


def _recombine(expr: sympy.Expr) -> sympy.Expr:
    """``c*n*(X // n) + c*(X % n)`` back to ``c*X`` (a split dim that is contiguous again), and
    ``c*n*((X // n) % k) + c*(X % n)`` to ``c*(X % (n*k))`` (two split dims that are one again)."""
    terms = list(sympy.Add.make_args(expr))
    changed = True
    while changed:
        changed = False
        for i, term in enumerate(terms):
            coeff, rest = term.as_coeff_Mul()
            if not (isinstance(rest, ModularIndexing) and rest.args[1] == 1 and rest.args[2].is_Integer):
                continue
            base, modulus = rest.args[0], rest.args[2]
            wanted = coeff * modulus * FloorDiv(base, modulus)
            if wanted in terms:
                terms = [t for k, t in enumerate(terms) if k != i and t != wanted] + [coeff * base]
                changed = True
                break
            merged = _merged_modulo(terms, i, coeff, base, modulus)
            if merged is not None:
                terms = merged
                changed = True
                break
    return sympy.expand(sympy.Add(*terms))


def _merged_modulo(
    terms: list[sympy.Expr], i: int, coeff: sympy.Expr, base: sympy.Expr, modulus: sympy.Expr
) -> list[sympy.Expr] | None:
    """``terms`` with ``terms[i] == c*(X % n)`` and some ``c*n*((X // n) % k)`` merged into ``c*(X % (n*k))``."""
    for j, other in enumerate(terms):
        other_coeff, other_rest = other.as_coeff_Mul()
        if j == i or not isinstance(other_rest, ModularIndexing) or other_coeff != coeff * modulus:
            continue
        inner, divisor, k = other_rest.args
        if divisor == 1 and isinstance(inner, FloorDiv) and inner.args == (base, modulus) and k.is_Integer:
            return [t for n, t in enumerate(terms) if n not in (i, j)] + [
                coeff * ModularIndexing(base, sympy.Integer(1), modulus * k)
            ]
    return None


def simplify_index(expr: sympy.Expr, ranges: Ranges) -> sympy.Expr:
    """``expr`` with its floor divisions and moduli simplified for loop variables in ``ranges``.

    Example:
        >>> x0, x1 = sympy.symbols("x0 x1", integer=True, nonnegative=True)
        >>> simplify_index(FloorDiv(128*x0 + x1, 8192), {x0: sympy.Integer(256), x1: sympy.Integer(128)})
        FloorDiv(x0, 64)
    """
    if not expr.has(FloorDiv, ModularIndexing):
        return expr
    try:
        return _recombine(sympy.expand(_simplify(expr, ranges)))
    except (TypeError, ValueError, ZeroDivisionError):
        return expr
