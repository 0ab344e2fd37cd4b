"""Merging contiguous dims of a group's iteration space: ``(8, 16)`` read as ``16*x0 + x1`` becomes ``(128,)`` read as ``x0``.

A run of adjacent dims merges when every load and store of the group indexes them like one
row-major dim (coefficients ``c * prod(inner sizes)``). Bodies are then run through
:class:`_Reindexer`, a handler in front of the backend's own that rewrites every index: linear
uses collapse to the merged variable, anything else (``index_expr`` of a mask, say) gets the exact
``FloorDiv``/``ModularIndexing`` of it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import sympy

from inductor_ir.backend import NodeBody
from inductor_ir.ir.tracing import MemoryDep
from inductor_ir.ops_handler import current_ops_handler, set_ops_handler
from inductor_ir.symbolic import FloorDiv, ModularIndexing

__all__ = ["DimMerge", "plan_merges"]

Runs = list[list[int]]


def _linear_compatible(expr: sympy.Expr, variables: Sequence[sympy.Symbol], sizes: Sequence[sympy.Expr]) -> bool:
    """Whether ``expr`` uses ``variables`` only as ``c * (row-major linear index of them)``."""
    return _linear_compatible_cached(expr, tuple(variables), tuple(sizes))


@functools.lru_cache(maxsize=1 << 15)
def _linear_compatible_cached(
    expr: sympy.Expr, variables: tuple[sympy.Symbol, ...], sizes: tuple[sympy.Expr, ...]
) -> bool:
    # Memoized: a pure function of SymPy values, and the same indices recur in every repeated layer.
    poly_vars = set(variables)
    for node in sympy.preorder_traversal(expr):
        if isinstance(node, (FloorDiv, ModularIndexing)) and node.free_symbols & poly_vars:
            return False
    # Split the expanded sum into a coefficient per variable and a rest without them (one pass over
    # its terms; SymPy's ``coeff`` would walk every term once per variable).
    coefficients: dict[sympy.Symbol, list[sympy.Expr]] = {}
    for term in sympy.Add.make_args(sympy.expand(expr)):
        if not term.free_symbols & poly_vars:
            continue
        coefficient, dependent = term.as_independent(*variables, as_Add=False)
        if dependent not in poly_vars:
            return False  # a product or power of the variables, or a function of them
        coefficients.setdefault(dependent, []).append(coefficient)
    last = sympy.Add(*coefficients.get(variables[-1], ()))
    stride = sympy.Integer(1)
    for var, size in zip(reversed(variables), reversed(sizes)):
        if sympy.expand(sympy.Add(*coefficients.get(var, ())) - last * stride) != 0:
            return False
        stride = stride * size
    return True


def _strides(sizes: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    out: list[sympy.Expr] = []
    running: sympy.Expr = sympy.Integer(1)
    for size in reversed(sizes):
        out.append(running)
        running = running * size
    return list(reversed(out))


def plan_merges(deps: Sequence[MemoryDep], variables: Sequence[sympy.Symbol], sizes: Sequence[sympy.Expr]) -> Runs:
    """Runs of adjacent dims that every dep indexes like one row-major dim."""
    runs: Runs = []
    current = [0] if variables else []
    for k in range(1, len(variables)):
        candidate = current + [k]
        vs = [variables[j] for j in candidate]
        ss = [sizes[j] for j in candidate]
        if all(_linear_compatible(dep.index, vs, ss) for dep in deps):
            current = candidate
        else:
            runs.append(current)
            current = [k]
    if current:
        runs.append(current)
    return runs


class DimMerge:
    """The rewrite from an original iteration space to a merged one (pointwise or reduction dims)."""

    def __init__(self, sizes: Sequence[sympy.Expr], runs: Runs, prefix: str) -> None:
        self.runs = runs
        self.sizes = tuple(sizes)
        self.placeholders = tuple(sympy.Symbol(f"_{prefix}{k}", integer=True, nonnegative=True) for k in range(len(sizes)))
        self.merged_sizes = tuple(sympy.Mul(*[sizes[j] for j in run]) for run in runs)
        self._rewritten: dict[tuple[sympy.Expr, tuple[sympy.Expr, ...]], sympy.Expr] = {}

    @property
    def trivial(self) -> bool:
        """No dims merged."""
        return all(len(run) == 1 for run in self.runs)

    def rewrite(self, expr: sympy.Expr, merged_vars: Sequence[sympy.Expr]) -> sympy.Expr:
        """``expr`` over placeholders -> over the merged variables (memoized per instance)."""
        key = (expr, tuple(merged_vars))
        done = self._rewritten.get(key)
        if done is None:
            done = self._rewritten[key] = self._rewrite(expr, merged_vars)
        return done

    def _rewrite(self, expr: sympy.Expr, merged_vars: Sequence[sympy.Expr]) -> sympy.Expr:
        subs: dict[sympy.Symbol, sympy.Expr] = {}
        for run, var in zip(self.runs, merged_vars):
            vs = [self.placeholders[j] for j in run]
            ss = [self.sizes[j] for j in run]
            if len(run) == 1:
                subs[vs[0]] = var
            elif _linear_compatible(expr, vs, ss):
                for v in vs[:-1]:
                    subs[v] = sympy.Integer(0)
                subs[vs[-1]] = var
            else:
                strides = _strides(ss)
                for pos, (v, size, stride) in enumerate(zip(vs, ss, strides)):
                    subs[v] = FloorDiv(var, stride) if pos == 0 else ModularIndexing(var, stride, size)
        if not subs:
            return expr
        result = sympy.sympify(expr).xreplace(subs)
        return sympy.expand(result) if not result.has(FloorDiv, ModularIndexing) else result


def merged_body(body: NodeBody, pw: DimMerge, rd: DimMerge) -> NodeBody:
    """``body`` over merged variables: runs it on placeholders behind a reindexing handler."""

    def run(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        handler = _Reindexer(current_ops_handler(), pw, rd, xs, rs)
        with set_ops_handler(handler):
            body(pw.placeholders, rd.placeholders if rs else ())

    return run


class _Reindexer:
    """Forwards every op to ``inner``, rewriting SymPy indices from placeholders to merged variables."""

    def __init__(self, inner: Any, pw: DimMerge, rd: DimMerge, xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        self._inner = inner
        self._pw, self._rd, self._xs, self._rs = pw, rd, xs, rs

    def _fix(self, expr: sympy.Expr) -> sympy.Expr:
        expr = self._pw.rewrite(expr, self._xs)
        return self._rd.rewrite(expr, self._rs) if self._rs else expr

    def load(self, name: str, index: sympy.Expr) -> Any:
        """Load at the rewritten index."""
        return self._inner.load(name, self._fix(index))

    def store(self, name: str, index: sympy.Expr, value: Any, mode: str | None = None) -> None:
        """Store at the rewritten index."""
        self._inner.store(name, self._fix(index), value, mode)

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        """Store a reduction at the rewritten index."""
        self._inner.store_reduction(name, self._fix(index), value)

    def index_expr(self, expr: sympy.Expr, dtype: Any) -> Any:
        """An index value over the merged variables."""
        return self._inner.index_expr(self._fix(expr), dtype)

    def masked(self, mask: Any, body: Callable[[], Any], other: Any) -> Any:
        """Masked evaluation; the body runs behind a reindexer of whatever handler is current then."""

        def reindexed_body() -> Any:
            handler = _Reindexer(current_ops_handler(), self._pw, self._rd, self._xs, self._rs)
            with set_ops_handler(handler):
                return body()

        return self._inner.masked(mask, reindexed_body, other)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
