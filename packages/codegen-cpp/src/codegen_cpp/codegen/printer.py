"""Printing SymPy index expressions as C++ int64 expressions."""

from __future__ import annotations

import sympy

from inductor_ir.symbolic import FloorDiv, ModularIndexing

__all__ = ["cpp_index", "cpp_int_literal"]

_INT32_MAX = 2**31 - 1


def cpp_int_literal(value: int) -> str:
    """An int64 literal (``12``, ``-3``, ``INT64_C(4294967296)``)."""
    if -_INT32_MAX <= value <= _INT32_MAX:
        return str(value)
    if value == -(2**63):
        # `-9223372036854775808` negates a literal too large for int64 (GCC makes it __int128).
        return "(-INT64_C(9223372036854775807) - 1)"
    return f"INT64_C({value})"


def _nonnegative(expr: sympy.Expr) -> bool:
    return bool(expr.is_nonnegative)


def _positive(expr: sympy.Expr) -> bool:
    return bool(expr.is_positive)


def _term(expr: sympy.Expr) -> str:
    """``expr`` parenthesized unless it is an atom or a call."""
    text = cpp_index(expr)
    if isinstance(expr, sympy.Symbol | sympy.Integer | FloorDiv | ModularIndexing | sympy.Min | sympy.Max):
        return text if not text.startswith("-") else f"({text})"
    return f"({text})"


def _floordiv(base: sympy.Expr, divisor: sympy.Expr) -> str:
    # C's `/` truncates toward zero: right for nonnegative operands (which inductor_ir promises for
    # FloorDiv); anything else goes through kiln::floordiv, which rounds toward negative infinity.
    if _nonnegative(base) and _positive(divisor):
        return f"({_term(base)} / {_term(divisor)})"
    return f"kiln::floordiv<int64_t>({cpp_index(base)}, {cpp_index(divisor)})"


def _mod(base: sympy.Expr, modulus: sympy.Expr) -> str:
    if _nonnegative(base) and _positive(modulus):
        return f"({_term(base)} % {_term(modulus)})"
    return f"kiln::floormod<int64_t>({cpp_index(base)}, {cpp_index(modulus)})"


def _add(expr: sympy.Add) -> str:
    terms = sorted(expr.args, key=sympy.default_sort_key)
    # Positive terms first, constants last: `x0 + 16*x1 - x2 + 3` reads like the maths.
    terms.sort(key=lambda t: 2 if t.is_Number else (1 if t.as_coeff_Mul()[0] < 0 else 0))
    text = cpp_index(terms[0])
    for term in terms[1:]:
        coeff, _ = term.as_coeff_Mul()
        if coeff.is_Number and coeff < 0:
            text += f" - {cpp_index(-term)}"
        else:
            text += f" + {cpp_index(term)}"
    return text


def _mul(expr: sympy.Mul) -> str:
    coeff, rest = expr.as_coeff_Mul()
    if coeff.is_Rational and not coeff.is_Integer:
        raise ValueError(f"index expression {expr} has a fractional coefficient; indices must be integers")
    factors = [_term(f) for f in sorted(sympy.Mul.make_args(rest), key=sympy.default_sort_key)]
    if coeff == -1:
        return "-" + "*".join(factors)
    if coeff != 1:
        factors.insert(0, _term(coeff))
    return "*".join(factors)


def cpp_index(expr: sympy.Expr) -> str:
    """A C++ expression of type int64_t for an integer SymPy index expression.

    Symbols print as their names (the kernel declares ``int64_t x0``, ``s0``, ...). ``FloorDiv`` and
    ``ModularIndexing`` of nonnegative operands print as C ``/`` and ``%``; ``floor``, ``Mod`` and
    divisions whose operands may be negative print as ``kiln::floordiv``/``kiln::floormod``, which
    round toward negative infinity like Python.

    Example: ``cpp_index(ModularIndexing(x0, 4, s0) + 3*x1)`` is ``((x0 / 4) % s0) + 3*x1``.
    """
    expr = sympy.sympify(expr)
    if isinstance(expr, sympy.Integer):
        return cpp_int_literal(int(expr))
    if isinstance(expr, sympy.Symbol):
        return str(expr.name)
    if isinstance(expr, sympy.Add):
        return _add(expr)
    if isinstance(expr, sympy.Mul):
        return _mul(expr)
    if isinstance(expr, sympy.Pow):
        base, exponent = expr.args
        if exponent.is_Integer and int(exponent) > 0:
            return "*".join([_term(base)] * int(exponent))
        raise ValueError(f"cannot print {expr} as an integer index")
    if isinstance(expr, FloorDiv):
        return _floordiv(*expr.args)
    if isinstance(expr, ModularIndexing):
        base, divisor, modulus = expr.args
        inner = base if divisor == 1 else FloorDiv(base, divisor)
        if divisor != 1 and isinstance(inner, FloorDiv):
            return _mod_of_text(_floordiv(base, divisor), inner, modulus)
        return _mod(inner, modulus)
    if isinstance(expr, sympy.floor):
        numerator, denominator = sympy.fraction(sympy.together(expr.args[0]))
        return f"kiln::floordiv<int64_t>({cpp_index(numerator)}, {cpp_index(denominator)})"
    if isinstance(expr, sympy.Mod) or type(expr).__name__ in ("Mod", "PythonMod"):  # torch's own, of sizes too
        return f"kiln::floormod<int64_t>({cpp_index(expr.args[0])}, {cpp_index(expr.args[1])})"
    if isinstance(expr, sympy.Max | sympy.Min):
        name = "std::max" if isinstance(expr, sympy.Max) else "std::min"
        args = [cpp_index(a) for a in expr.args]
        text = args[0]
        for arg in args[1:]:
            text = f"{name}<int64_t>({text}, {arg})"
        return text
    if isinstance(expr, sympy.Abs):  # `abs(n - 3)` of sizes
        text = cpp_index(expr.args[0])
        return f"std::max<int64_t>({text}, -({text}))"
    if type(expr).__name__ == "TruncToInt" and type(expr.args[0]).__name__ == "IntTrueDiv":
        # `int(a / b)` of sizes: C's integer `/` truncates toward zero, as `int()` does.
        return f"({_term(expr.args[0].args[0])} / {_term(expr.args[0].args[1])})"
    operator = _BITWISE.get(type(expr).__name__)
    if operator is not None:  # a Python int's `a ^ b` of sizes: two's complement, as int64_t's
        return f"({_term(expr.args[0])} {operator} {_term(expr.args[1])})"
    raise ValueError(f"cannot print {expr!r} ({type(expr).__name__}) as a C++ index expression")


_BITWISE = {"BitwiseFn_bitwise_and": "&", "BitwiseFn_bitwise_or": "|", "BitwiseFn_bitwise_xor": "^"}
"""torch's opaque SymPy functions for ``&``, ``|`` and ``^`` of symbolic ints, by class name."""


def _mod_of_text(quotient_text: str, quotient: sympy.Expr, modulus: sympy.Expr) -> str:
    if _nonnegative(quotient) and _positive(modulus):
        return f"({quotient_text} % {_term(modulus)})"
    return f"kiln::floormod<int64_t>({quotient_text}, {cpp_index(modulus)})"
