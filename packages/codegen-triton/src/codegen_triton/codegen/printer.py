"""SymPy index expressions printed as Triton expressions, with the IR's `//` and `%` semantics.

Index expressions contain `Add`, `Mul`, `Integer`, `Symbol` and the IR's `FloorDiv(a, b)` and
`ModularIndexing(x, div, mod)` (= `(x // div) % mod`), whose operands are never negative: Triton's
integer `//` and `%` (C semantics) are then exact. Plain SymPy `floor`, `Mod`, `Min`, `Max` and
integer powers are printed too, for expressions simplified by SymPy itself.
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
            base, divisor = expr.args
            return f"{self.paren(base)} // {self.paren(divisor)}"
        if name == "ModularIndexing":
            base, divisor, modulus = expr.args
            if divisor == 1:
                return f"{self.paren(base)} % {self.paren(modulus)}"
            return f"({self.paren(base)} // {self.paren(divisor)}) % {self.paren(modulus)}"
        if isinstance(expr, sympy.Mod):
            return f"{self.paren(expr.args[0])} % {self.paren(expr.args[1])}"
        if isinstance(expr, sympy.floor) and isinstance(expr.args[0], sympy.Mul):
            numerator, denominator = sympy.fraction(expr.args[0])
            return f"{self.paren(numerator)} // {self.paren(denominator)}"
        if isinstance(expr, sympy.Min | sympy.Max):
            fn = "tl.minimum" if isinstance(expr, sympy.Min) else "tl.maximum"
            text = self._print(expr.args[0])
            for arg in expr.args[1:]:
                text = f"{fn}({text}, {self._print(arg)})"
            return text
        raise NotImplementedError(f"cannot print index expression {expr} ({name}) as Triton")

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
