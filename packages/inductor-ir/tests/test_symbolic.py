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
