"""SymPy index expressions printed as Triton expressions, with the IR's `//` and `%` semantics.

Index expressions contain `Add`, `Mul`, `Integer`, `Symbol` and the IR's `FloorDiv(a, b)` and
`ModularIndexing(x, div, mod)` (= `(x // div) % mod`). Triton's integer `//` and `%` have C
semantics (truncation), exact where the dividend is known nonnegative; elsewhere (a symbolic
``Mod(-5, s0)`` of a roll, an indirect index) they print with SymPy's floor semantics. Plain SymPy
`floor`, `Mod`, `Min`, `Max` and integer powers are printed too, for expressions simplified by
SymPy itself. Divisors are sizes and strides: positive.
"""

from __future__ import annotations

from collections.abc import Mapping

import sympy

__all__ = ["TritonIndexPrinter"]


class TritonIndexPrinter:
    """Prints SymPy expressions as Triton source; symbols may be renamed through `names`.

    Example:
        >>> x, s = sympy.symbols("x0 s1", integer=True)
        >>> TritonIndexPrinter().print(x + 4 * s)
        'x0 + 4*s1'
    """

    def __init__(self, names: Mapping[sympy.Symbol, str] | None = None) -> None:
        """Args: names: source text for some symbols (e.g. an indirect index's variable name)."""
        self.names = dict(names or {})

    def print(self, expr: sympy.Expr | int) -> str:
        """Triton source for `expr`."""
        return self._print(sympy.sympify(expr))

    def paren(self, expr: sympy.Basic) -> str:
        """Like `print`, in parentheses unless `expr` is a symbol or a non-negative integer."""
        text = self._print(expr)
        if isinstance(expr, sympy.Symbol | sympy.Integer) and not text.startswith("-"):
            return text
        return f"({text})"

    def _print(self, expr: sympy.Basic) -> str:
        if isinstance(expr, sympy.Symbol):
            name: str = self.names.get(expr, expr.name)
            return name
        if isinstance(expr, sympy.Integer):
            return str(int(expr))
        if isinstance(expr, sympy.Rational):
            return f"({expr.p} / {expr.q})"
        if isinstance(expr, sympy.Add):
            return self._print_add(expr)
        if isinstance(expr, sympy.Mul):
            return self._print_mul(expr)
        if isinstance(expr, sympy.Pow):
            return self._print_pow(expr)
        name = type(expr).__name__
        if name == "FloorDiv":
            return self._floordiv(*expr.args)
        if name == "ModularIndexing":
            base, divisor, modulus = expr.args
            if divisor == 1:
                return self._floormod(self.paren(base), bool(base.is_nonnegative), modulus)
            return self._floormod(f"({self._floordiv(base, divisor)})", bool(base.is_nonnegative), modulus)
        if isinstance(expr, sympy.Mod) or name in ("Mod", "PythonMod"):  # torch's own, of sizes too
            return self._floormod(self.paren(expr.args[0]), bool(expr.args[0].is_nonnegative), expr.args[1])
        if isinstance(expr, sympy.floor) and isinstance(expr.args[0], sympy.Mul):
            numerator, denominator = sympy.fraction(expr.args[0])
            return self._floordiv(numerator, denominator)
        if isinstance(expr, sympy.Min | sympy.Max):
            fn = "tl.minimum" if isinstance(expr, sympy.Min) else "tl.maximum"
            text = self._print(expr.args[0])
            for arg in expr.args[1:]:
                text = f"{fn}({text}, {self._print(arg)})"
            return text
        if isinstance(expr, sympy.Abs):  # `abs(n - 3)` of sizes
            return f"tl.abs({self._print(expr.args[0])})"
        if name == "TruncToInt" and type(expr.args[0]).__name__ == "IntTrueDiv":
            # `int(a / b)` of sizes: Triton's integer `//` truncates toward zero, as `int()` does.
            return f"({self.paren(expr.args[0].args[0])} // {self.paren(expr.args[0].args[1])})"
        if name in _BITWISE:  # a Python int's `a ^ b` of sizes: two's complement, as Triton's integers
            return f"({self.paren(expr.args[0])} {_BITWISE[name]} {self.paren(expr.args[1])})"
        raise NotImplementedError(f"cannot print index expression {expr} ({name}) as Triton")

    def _divisor(self, divisor: sympy.Expr) -> str:
        """A divisor's text: sizes and strides, positive (`FloorDiv(s0, 2)` too, where SymPy
        cannot tell); one known to be negative or zero is refused."""
        if divisor.is_nonpositive:
            raise NotImplementedError(f"cannot print a division by {divisor} (not positive) as Triton")
        return self.paren(divisor)

    def _floordiv(self, base: sympy.Expr, divisor: sympy.Expr) -> str:
        """``base // divisor`` rounded toward negative infinity, as SymPy and Python round (Triton's
        integer ``//`` truncates: ``-5 // 2`` is -2 there): a dividend that may be negative first
        loses its floor remainder."""
        b = self._divisor(divisor)
        if base.is_nonnegative:
            return f"{self.paren(base)} // {b}"
        return f"({self.paren(base)} - {self._floormod(self.paren(base), False, divisor)}) // {b}"

    def _floormod(self, base: str, nonnegative: bool, divisor: sympy.Expr) -> str:
        """``base % divisor`` with the divisor's sign, as SymPy's ``Mod`` (Triton's integer ``%``
        takes the dividend's sign: ``-5 % 2`` is -1 there); `base` is already source text."""
        b = self._divisor(divisor)
        if nonnegative:
            return f"{base} % {b}"
        return f"(({base} % {b}) + {b}) % {b}"

    def _print_add(self, expr: sympy.Add) -> str:
        terms = sorted(expr.args, key=lambda t: (t.is_number, sympy.default_sort_key(t)))
        text = self._print(terms[0])
        for term in terms[1:]:
            coeff, _rest = term.as_coeff_Mul()
            if coeff.is_negative:
                text += f" - {self._print(-term)}"
            else:
                text += f" + {self._print(term)}"
        return text

    def _print_mul(self, expr: sympy.Mul) -> str:
        coeff, rest = expr.as_coeff_Mul()
        if coeff == -1:
            return f"-{self.paren(rest)}"
        factors = [self.paren(f) for f in sympy.Mul.make_args(rest)]
        if coeff != 1:
            factors.insert(0, self.paren(coeff))
        return "*".join(factors)

    def _print_pow(self, expr: sympy.Pow) -> str:
        base, exponent = expr.args
        if isinstance(exponent, sympy.Integer) and int(exponent) > 0:
            return "*".join([self.paren(base)] * int(exponent))
        raise NotImplementedError(f"cannot print power {expr} in an index expression")


_BITWISE = {"BitwiseFn_bitwise_and": "&", "BitwiseFn_bitwise_or": "|", "BitwiseFn_bitwise_xor": "^"}
"""torch's opaque SymPy functions for ``&``, ``|`` and ``^`` of symbolic ints, by class name."""
