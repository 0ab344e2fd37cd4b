"""SymPy functions for index arithmetic, and index simplification.

Indices and sizes are SymPy expressions from the ground up. Besides ``Add``, ``Mul``, ``Integer``
and ``Symbol`` they use two functions of nonnegative integers:

* ``FloorDiv(a, b)``: ``a // b``;
* ``ModularIndexing(x, d, m)``: ``(x // d) % m``.

Because their operands are never negative, code generators may print them with C-style ``/`` and
``%``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import sympy

__all__ = [
    "FloorDiv",
    "ModularIndexing",
    "concrete_hint",
    "index_symbol",
    "simplify_index",
    "size_symbol",
    "sympify_int",
]


_CANCEL_LIMIT = 40
"""The most operations `_is_multiple` hands to ``sympy.cancel`` (whose cost grows fast with the
size of the expression: nested views of symbolic sizes made poolformer's lowering take minutes)."""


@functools.lru_cache(maxsize=8192)
def _op_count(expr: sympy.Expr) -> int:
    return int(sympy.count_ops(expr))


@functools.lru_cache(maxsize=8192)
def _is_multiple(term: sympy.Expr, divisor: sympy.Expr) -> bool:
    """Whether ``term / divisor`` is an integer expression. False when it cannot tell cheaply
    (a FloorDiv or ModularIndexing then stays as it is: less simplified, never wrong)."""
    if divisor == 1:
        return bool(term.is_integer)
    term_coeff, term_rest = term.as_coeff_Mul()
    divisor_coeff, divisor_rest = divisor.as_coeff_Mul()
    if term_coeff.is_Integer and divisor_coeff.is_Integer and int(divisor_coeff) != 0:
        if int(term_coeff) % int(divisor_coeff) == 0:
            left = list(sympy.Mul.make_args(term_rest))
            for factor in sympy.Mul.make_args(divisor_rest):
                if factor == 1:
                    continue
                if factor not in left:
                    break
                left.remove(factor)
            else:
                return all(bool(f.is_integer) for f in left)
    if _op_count(term) + _op_count(divisor) > _CANCEL_LIMIT:
        return False
    quotient = sympy.cancel(term / divisor)
    return bool(quotient.is_integer) and bool(sympy.fraction(quotient)[1] == 1)


class FloorDiv(sympy.Function):
    """``base // divisor`` for nonnegative integers."""

    nargs = 2
    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, base: sympy.Expr, divisor: sympy.Expr) -> sympy.Expr | None:  # type: ignore[override]
        if divisor == 1:
            return base
        if divisor == 0:
            return sympy.Integer(0)  # a view of an empty tensor: no element ever computes this index
        if base == 0:
            return sympy.Integer(0)
        if base.is_Integer and divisor.is_Integer:
            return sympy.Integer(int(base) // int(divisor))
        if isinstance(base, FloorDiv):
            return FloorDiv(base.args[0], base.args[1] * divisor)
        # Terms that are exact multiples of the divisor come out of the division when the rest
        # is known to be nonnegative: ``(6 - x) // 2`` stays whole, as ``3 + (-x) // 2`` would be a
        # FloorDiv of a negative base (this class promises nonnegative operands).
        if isinstance(base, sympy.Add):
            whole = [t for t in base.args if _is_multiple(t, divisor)]
            rest = sympy.Add(*[t for t in base.args if not _is_multiple(t, divisor)])
            if whole and rest.is_nonnegative:
                return sympy.Add(*[sympy.cancel(t / divisor) for t in whole]) + FloorDiv(rest, divisor)
        elif _is_multiple(base, divisor):
            return sympy.cancel(base / divisor)
        return None

    def _sympystr(self, printer: sympy.printing.StrPrinter) -> str:
        return f"(({printer.doprint(self.args[0])}) // {printer.parenthesize(self.args[1], 50)})"


class ModularIndexing(sympy.Function):
    """``(base // divisor) % modulus`` for nonnegative integers."""

    nargs = 3
    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(  # type: ignore[override]
        cls, base: sympy.Expr, divisor: sympy.Expr, modulus: sympy.Expr
    ) -> sympy.Expr | None:
        if base == 0 or modulus == 1 or modulus == 0 or divisor == 0:
            return sympy.Integer(0)  # 0 and 0: a view of an empty tensor, whose index never computes
        if base.is_Integer and divisor.is_Integer and modulus.is_Integer:
            return sympy.Integer((int(base) // int(divisor)) % int(modulus))
        if isinstance(base, sympy.Add):
            # Drop terms that are multiples of divisor * modulus: they do not change the result.
            kept = [t for t in base.args if not _is_multiple(t, divisor * modulus)]
            if len(kept) != len(base.args):
                return ModularIndexing(sympy.Add(*kept), divisor, modulus)
        elif _is_multiple(base, divisor * modulus):
            return sympy.Integer(0)
        return None

    def _sympystr(self, printer: sympy.printing.StrPrinter) -> str:
        base, divisor, modulus = (printer.doprint(a) for a in self.args)
        if self.args[1] == 1:
            return f"(({base}) % {modulus})"
        return f"((({base}) // {divisor}) % {modulus})"


def sympify_int(value: object) -> sympy.Expr:
    """A SymPy integer expression for an int, a SymPy expression or a ``torch.SymInt``.

    A SymInt's expression is rewritten into this package's vocabulary (see :func:`from_shape_env`).
    """
    node = getattr(value, "node", None)
    if node is not None and hasattr(node, "expr"):
        from inductor_ir.shape_env_sympy import from_shape_env

        return from_shape_env(sympy.sympify(node.expr), getattr(node, "shape_env", None))
    if isinstance(value, sympy.Expr):
        return value
    return sympy.Integer(int(value))  # type: ignore[call-overload]


def concrete_hint(value: object) -> int | None:
    """The concrete value of an int or a ``torch.SymInt`` (its hint), without adding a guard.

    ``int(sym_int)`` would specialize the symbol in its ShapeEnv (every later read of the fake
    tensors' sizes would see the constant); the hint is read from the SymNode instead.
    """
    node = getattr(value, "node", None)
    if node is not None and hasattr(node, "expr"):
        hint = getattr(node, "hint", None)
        return None if hint is None else int(hint)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


@functools.lru_cache(maxsize=1024)
def index_symbol(prefix: str, position: int) -> sympy.Symbol:
    """An iteration variable such as ``i0`` or ``r1`` (integer, nonnegative)."""
    return sympy.Symbol(f"{prefix}{position}", integer=True, nonnegative=True)


def size_symbol(position: int) -> sympy.Symbol:
    """The size symbol ``s<position>`` (positive integer)."""
    return sympy.Symbol(f"s{position}", integer=True, positive=True)


def simplify_index(expr: sympy.Expr, ranges: Sequence[tuple[sympy.Symbol, sympy.Expr]] = ()) -> sympy.Expr:
    """Simplify an index expression given each variable's range ``[0, size)``.

    Drops variables whose range is 1, removes ``ModularIndexing``/``FloorDiv`` that cannot wrap
    (``x % m`` with ``x < m``; ``x // d`` with ``x < d``) and expands products.

    Cached: nested views re-index the same expressions for every load that reaches through them,
    and with symbolic sizes each simplification runs polynomial gcds (poolformer's pooling at a new
    image size took minutes to lower).
    """
    return _simplify_index(sympy.sympify(expr), tuple((var, sympy.sympify(size)) for var, size in ranges))


@functools.lru_cache(maxsize=16384)
def _simplify_index(expr: sympy.Expr, ranges: tuple[tuple[sympy.Symbol, sympy.Expr], ...]) -> sympy.Expr:
    expr = sympy.expand(expr)
    subs = {var: sympy.Integer(0) for var, size in ranges if size == 1}
    if subs:
        expr = sympy.expand(expr.xreplace(subs))
    bounds = {var: size for var, size in ranges}

    def upper(e: sympy.Expr) -> sympy.Expr | None:
        """An exclusive upper bound of a nonnegative expression, when easy to tell (None for an
        expression that may be negative: ``-x0`` is no index below 1)."""
        if e.is_Integer:
            return e + 1 if e >= 0 else None
        if isinstance(e, sympy.Symbol):
            return bounds.get(e)
        if isinstance(e, sympy.Add):
            total = sympy.Integer(1)
            for term in e.args:
                bound = upper(term)
                if bound is None:
                    return None
                total += bound - 1
            return total
        if isinstance(e, sympy.Mul):
            coeff, rest = e.as_coeff_Mul()
            if coeff.is_Integer and coeff > 0 and rest is not e:
                bound = upper(rest)
                return None if bound is None else coeff * (bound - 1) + 1
            # A product of an index variable and positive size symbols (``s1*x0``): the largest
            # value is the product of the factors' largest values.
            largest = sympy.Integer(1)
            for factor in e.args:
                if isinstance(factor, sympy.Symbol) and factor not in bounds and factor.is_positive:
                    largest *= factor
                elif isinstance(factor, sympy.Pow) and factor.exp.is_Integer and factor.exp > 0 and factor.base.is_positive and factor.base not in bounds:
                    largest *= factor
                else:
                    bound = upper(factor)
                    if bound is None:
                        return None
                    largest *= bound - 1
            return sympy.expand(largest) + 1
        if isinstance(e, ModularIndexing):
            return e.args[2]
        return None

    def split_common(base: sympy.Expr, divisor: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr] | None:
        """``(q, g)`` with ``base == g*q + rest``, ``0 <= rest < g`` and ``g`` dividing ``divisor`` (symbolic g)."""
        if not isinstance(base, sympy.Add) or divisor.is_Integer:
            return None
        if _op_count(base) + _op_count(divisor) > _CANCEL_LIMIT:
            return None  # polynomial gcds of large expressions cost seconds: left unsimplified
        big: list[sympy.Expr] = []
        rest: list[sympy.Expr] = []
        for term in base.args:
            g = sympy.gcd(term, divisor)
            (big if g != 1 and not g.is_Integer else rest).append(term)
        if not big or not rest:
            return None
        common = sympy.gcd_list([*big, divisor]) if len(big) > 1 else sympy.gcd(big[0], divisor)
        if common == 1 or common.is_Integer or not fits(upper(sympy.Add(*rest)), common):
            return None
        return sympy.expand(sympy.Add(*big) / common), common

    def fits(bound: sympy.Expr | None, limit: sympy.Expr) -> bool:
        if bound is None:
            return False
        diff = sympy.expand(limit - bound)
        return bool(diff.is_nonnegative)

    settled: set[sympy.Expr] = set()  # nodes no rule changes (checked once, not on every pass)
    changed = True
    while changed:
        changed = False
        recombined = _recombine_digits(expr)
        if recombined is not None:
            expr = recombined
            changed = True
            continue
        for node in sympy.preorder_traversal(expr):
            if not isinstance(node, FloorDiv | ModularIndexing) or node in settled:
                continue
            if isinstance(node, ModularIndexing):
                base, divisor, modulus = node.args
                if fits(upper(base), divisor * modulus):
                    expr = expr.xreplace({node: FloorDiv(base, divisor)})
                    changed = True
                    break
            if isinstance(node, FloorDiv):
                base, divisor = node.args
                if fits(upper(base), divisor):
                    expr = expr.xreplace({node: sympy.Integer(0)})
                    changed = True
                    break
            if isinstance(node, FloorDiv | ModularIndexing):
                # (g*q + r) // (g*d) == q // d and ((g*q + r) // (g*d)) % m == (q // d) % m when 0 <= r < g.
                split = split_common(node.args[0], node.args[1])
                if split is not None:
                    quotient, common = split
                    divisor = sympy.cancel(node.args[1] / common)
                    if sympy.fraction(divisor)[1] == 1:
                        replacement = (
                            FloorDiv(quotient, divisor)
                            if isinstance(node, FloorDiv)
                            else ModularIndexing(quotient, divisor, node.args[2])
                        )
                        expr = expr.xreplace({node: replacement})
                        changed = True
                        break
            settled.add(node)
    return sympy.expand(expr)


def _recombine_digits(expr: sympy.Expr) -> sympy.Expr | None:
    """``c*d*m * (f // (d*m)) + c*d * ((f // d) % m)`` -> ``c*d * (f // d)`` (None: no such pair).

    A view of a reshaped contiguous buffer indexes it digit by digit (``f // 393216``,
    ``(f // 3072) % 128``, ``f % 3072``); putting the digits back together gives the flat index
    ``f``, which code generators can vectorize.
    """
    if not isinstance(expr, sympy.Add):
        return None
    floors: list[tuple[sympy.Expr, sympy.Expr, sympy.Expr, sympy.Expr]] = []
    mods: list[tuple[sympy.Expr, sympy.Expr, sympy.Expr, sympy.Expr, sympy.Expr]] = []
    for term in expr.args:
        coeff, rest = term.as_coeff_Mul()
        if isinstance(rest, FloorDiv):
            floors.append((term, coeff, rest.args[0], rest.args[1]))
        elif isinstance(rest, ModularIndexing):
            mods.append((term, coeff, *rest.args))
    for floor_term, floor_coeff, base, whole in floors:
        for mod_term, mod_coeff, mod_base, divisor, modulus in mods:
            if mod_base != base or sympy.expand(divisor * modulus - whole) != 0:
                continue
            if sympy.expand(floor_coeff - mod_coeff * modulus) != 0:
                continue
            rest = expr - floor_term - mod_term
            return sympy.expand(rest + mod_coeff * FloorDiv(base, divisor))
    return None
