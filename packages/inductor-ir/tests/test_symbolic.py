"""SymPy index functions and simplification."""

from __future__ import annotations

import sympy

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
