"""SymPy index functions and simplification."""

from __future__ import annotations

import sympy
import torch

from inductor_ir import FloorDiv, ModularIndexing, simplify_index
from inductor_ir.symbolic import index_symbol


def test_floordiv_and_modular_indexing_fold() -> None:
    x = index_symbol("i", 0)
    assert FloorDiv(16 * x + 3, 16) == x
    assert FloorDiv(sympy.Integer(17), 4) == 4
    assert ModularIndexing(16 * x + 3, 1, 16) == 3
    assert ModularIndexing(sympy.Integer(17), 2, 4) == 0


def test_simplify_drops_size_one_dims_and_useless_mod() -> None:
    i0, i1 = index_symbol("i", 0), index_symbol("i", 1)
    expr = 8 * i0 + ModularIndexing(i1, 1, 8)
    assert simplify_index(expr, [(i0, sympy.Integer(1)), (i1, sympy.Integer(8))]) == i1
    assert simplify_index(FloorDiv(i1, 8), [(i1, sympy.Integer(8))]) == 0


def test_floordiv_keeps_a_base_that_may_be_negative_whole() -> None:
    """``(6 - x) // 2`` is not split into ``3 + (-x) // 2``: FloorDiv promises a nonnegative base."""
    x = index_symbol("i", 0)
    assert FloorDiv(6 + x, 2) == 3 + FloorDiv(x, 2)
    assert FloorDiv(6 - x, 2).args == (6 - x, 2)


def test_simplify_keeps_floordiv_of_a_negative_term() -> None:
    """``(-x0) // 2`` is no index below 2: the bound of ``-x0`` is not its largest value (fuzz: the
    gradient of ``x.flip(0)[::2]`` read one row of the cotangent for every row)."""
    i0, i1 = index_symbol("i", 0), index_symbol("i", 1)
    expr = i1 + 3 * FloorDiv(-i0, 2) + 9
    assert simplify_index(expr, [(i0, sympy.Integer(7)), (i1, sympy.Integer(3))]) == expr


def test_multiples_of_symbolic_divisors_are_found_without_polynomial_division() -> None:
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    x0, x1 = sympy.symbols("x0 x1", integer=True, nonnegative=True)
    assert FloorDiv(6 * s0 * x0 + x1, 3 * s0) == 2 * x0 + FloorDiv(x1, 3 * s0)
    assert ModularIndexing(4 * s0 * s1 * x0 + x1, 2 * s1, 2 * s0) == ModularIndexing(x1, 2 * s1, 2 * s0)
    assert FloorDiv(5 * s0 * x0, 3 * s0) != 5 * x0 / 3  # not a multiple: stays a FloorDiv
    for a, b, c in [(0, 0, 1), (3, 7, 2), (5, 11, 3)]:
        value = FloorDiv(6 * s0 * x0 + x1, 3 * s0).subs({s0: c, x0: a, x1: b})
        assert value == (6 * c * a + b) // (3 * c)


def test_simplifying_a_large_index_stays_correct_and_is_cached() -> None:
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    x0, x1 = sympy.symbols("x0 x1", integer=True, nonnegative=True)
    flat = x0 * s1 + x1
    expr = s1 * FloorDiv(flat, s1) + ModularIndexing(flat, 1, s1)
    ranges = [(x0, s0), (x1, s1)]
    first = simplify_index(expr, ranges)
    assert simplify_index(expr, ranges) is first  # the same object: from the cache
    for a, b, n0, n1 in [(0, 0, 2, 3), (1, 2, 2, 3), (4, 5, 7, 6)]:
        env = {x0: a, x1: b, s0: n0, s1: n1}
        assert first.subs(env) == expr.subs(env)


def test_contiguity_of_symbolic_layouts_is_decided_by_expansion() -> None:
    from inductor_ir.ir.layout import Layout, contiguous_strides

    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    padded = sympy.Max(s0 - 3, 0) + 1  # a SAME-padding size: simplify() on such strides took minutes
    size = (sympy.Integer(2), padded, s1 + 1)
    assert Layout("cpu", torch.float32, size, contiguous_strides(size)).is_contiguous()
    expanded = (sympy.expand(padded * (s1 + 1)), s1 + 1, sympy.Integer(1))
    assert Layout("cpu", torch.float32, size, expanded).is_contiguous()
    assert not Layout("cpu", torch.float32, size, (s1 + 1, sympy.Integer(1), padded)).is_contiguous()
