"""Running a pointwise node over a group space whose dims are ordered or split differently.

A batch-norm backward reduces over ``(C,) x (N, HW)`` while its pointwise terms loop over
``(N, C, HW)``; a layer norm over a reshaped input reduces over ``(B, T) x (D,)`` while its epilogue
loops over ``(B*T, D)``. A :data:`DimMap` says how each of the node's dims is made of the group's
dims, so the node can run inside the reduction's kernel. Index expressions of such a node (which
often hold ``//`` and ``%`` from views) are simplified over the group's ranges, so that equal
accesses compare equal and code generators see plain affine indices.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import sympy

from inductor_ir.backend import NodeBody
from inductor_ir.ir.tracing import MemoryDep
from inductor_ir.ops_handler import current_ops_handler, set_ops_handler
from inductor_ir.symbolic import FloorDiv, ModularIndexing, simplify_index

__all__ = ["DimMap", "dim_maps", "mapped_body", "numel", "simplified_deps", "simplifying_body"]

Sizes = tuple[sympy.Expr, ...]

DimMap = tuple[tuple[tuple[int, sympy.Expr], ...], ...]
"""For each (squeezed) dim of a node: the group dims it spans, outer first, each with its weight
(``node_var_k = sum(group_var_g * weight)``). ``(N, C, HW)`` over ``(C, N, HW)`` is
``(((1, 1),), ((0, 1),), ((2, 1),))``; ``(B*T, D)`` over ``(B, T, D)`` is
``(((0, T), (1, 1)), ((2, 1),))``."""

_MAX_DIM_MAPS = 8
_MAX_DIMS = 6


def numel(sizes: Sequence[sympy.Expr]) -> sympy.Expr:
    """The product of ``sizes`` (1 for none)."""
    return sympy.Mul(*sizes) if sizes else sympy.Integer(1)


def _too_big(product: sympy.Expr, size: sympy.Expr) -> bool:
    return bool(product.is_Integer and size.is_Integer and product > size)


def _is_identity(runs: tuple[tuple[int, ...], ...], count: int) -> bool:
    return [g for run in runs for g in run] == list(range(count))


def dim_maps(node_sizes: Sequence[Any], group_sizes: Sequence[Any], *, monotone: bool = False) -> list[DimMap]:
    """Ways to iterate a node of ``node_sizes`` over a group space of ``group_sizes`` (same numel).

    Each node dim takes a run of consecutive group dims whose sizes multiply to its size; every group
    dim is used once. Order-preserving maps come first; ``monotone=True`` keeps only those. At most
    eight maps are returned (none when the numels differ).
    """
    nodes = tuple(sympy.sympify(n) for n in node_sizes)
    groups = tuple(sympy.sympify(n) for n in group_sizes)
    if not nodes or len(nodes) > _MAX_DIMS or len(groups) > _MAX_DIMS or numel(nodes) != numel(groups):
        return []
    used = [False] * len(groups)
    found: list[tuple[tuple[int, ...], ...]] = []

    def runs(size: sympy.Expr) -> list[tuple[int, ...]]:
        result = []
        for start in range(len(groups)):
            product: sympy.Expr = sympy.Integer(1)
            for end in range(start, len(groups)):
                if used[end]:
                    break
                product = product * groups[end]
                if product == size:
                    result.append(tuple(range(start, end + 1)))
                    break
                if _too_big(product, size):
                    break
        return result

    def search(k: int, chosen: list[tuple[int, ...]]) -> None:
        if len(found) >= 4 * _MAX_DIM_MAPS:
            return
        if k == len(nodes):
            if all(used):
                found.append(tuple(chosen))
            return
        for run in runs(nodes[k]):
            for g in run:
                used[g] = True
            chosen.append(run)
            search(k + 1, chosen)
            chosen.pop()
            for g in run:
                used[g] = False

    search(0, [])
    ordered = sorted(found, key=lambda m: not _is_identity(m, len(groups)))
    if monotone:
        ordered = [m for m in ordered if _is_identity(m, len(groups))]
    maps: list[DimMap] = []
    for node_runs in ordered[:_MAX_DIM_MAPS]:
        node_map = []
        for run in node_runs:
            weights, weight = [], sympy.Integer(1)
            for g in reversed(run):
                weights.append((g, weight))
                weight = weight * groups[g]
            node_map.append(tuple(reversed(weights)))
        maps.append(tuple(node_map))
    return maps


@functools.lru_cache(maxsize=4096)
def _simplify(expr: sympy.Expr, ranges: tuple[tuple[sympy.Symbol, sympy.Expr], ...]) -> sympy.Expr:
    return simplify_index(expr, ranges)


def simplified_deps(deps: list[MemoryDep], ranges: list[tuple[sympy.Symbol, sympy.Expr]]) -> list[MemoryDep]:
    """``deps`` with ``//`` and ``%`` in their indices simplified over ``ranges``."""
    out = []
    for dep in deps:
        if dep.index.has(FloorDiv, ModularIndexing):
            dep = MemoryDep(dep.name, _simplify(dep.index, tuple(ranges)))
        out.append(dep)
    return out


def mapped_body(
    store: Callable[[list[sympy.Expr]], None], dim_map: DimMap, sizes: Sizes, in_loop: bool
) -> NodeBody:
    """A node body over the group's variables: ``store(node_vars)`` runs with the node's variables
    made of the group's by ``dim_map``, its indices simplified over the group's ``sizes``."""

    def run(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        variables = list(xs) + list(rs) if in_loop else list(xs)
        node_vars = [sympy.Add(*(variables[g] * w for g, w in run)) for run in dim_map]
        ranges = [(v, s) for v, s in zip(variables, sizes) if isinstance(v, sympy.Symbol)]
        with set_ops_handler(_Simplifier(current_ops_handler(), ranges)):
            store(node_vars)

    return run


def simplifying_body(body: NodeBody, sizes: Sizes) -> NodeBody:
    """``body`` with its indices simplified over the group's ranges ``sizes`` (``xs`` then ``rs``)."""

    def run(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
        ranges = [(v, s) for v, s in zip((*xs, *rs), sizes) if isinstance(v, sympy.Symbol)]
        with set_ops_handler(_Simplifier(current_ops_handler(), ranges)):
            body(xs, rs)

    return run


class _Simplifier:
    """Forwards every op to ``inner``, simplifying index expressions that hold ``//`` or ``%``."""

    def __init__(self, inner: Any, ranges: Sequence[tuple[sympy.Symbol, sympy.Expr]]) -> None:
        self._inner = inner
        self._ranges = tuple(ranges)

    def _fix(self, expr: sympy.Expr) -> sympy.Expr:
        expr = sympy.sympify(expr)
        return _simplify(expr, self._ranges) if expr.has(FloorDiv, ModularIndexing) else expr

    def load(self, name: str, index: sympy.Expr) -> Any:
        """Load at the simplified index."""
        return self._inner.load(name, self._fix(index))

    def store(self, name: str, index: sympy.Expr, value: Any, mode: str | None = None) -> None:
        """Store at the simplified index."""
        self._inner.store(name, self._fix(index), value, mode)

    def index_expr(self, expr: sympy.Expr, dtype: Any) -> Any:
        """An index value, simplified."""
        return self._inner.index_expr(self._fix(expr), dtype)

    def masked(self, mask: Any, body: Callable[[], Any], other: Any) -> Any:
        """Masked evaluation; the body runs behind a simplifier of whatever handler is current then."""

        def simplified_body() -> Any:
            with set_ops_handler(_Simplifier(current_ops_handler(), self._ranges)):
                return body()

        return self._inner.masked(mask, simplified_body, other)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
