"""Index expressions printed as Triton, and the contiguity rewrite."""

from __future__ import annotations

import sympy

from codegen_triton.codegen.indexing import AxisDims, collapse_contiguous
from codegen_triton.codegen.printer import TritonIndexPrinter
from inductor_ir import FloorDiv, ModularIndexing

x0, x1, x2, s0 = sympy.symbols("x0 x1 x2 s0", integer=True, nonnegative=True)
xindex = sympy.Symbol("xindex", integer=True, nonnegative=True)


def _eval(text: str, **values: int) -> int:
    return int(eval(text, {}, values))


def test_prints_ir_division_and_modulus_with_floor_semantics() -> None:
    printer = TritonIndexPrinter()
    expr = FloorDiv(x0, 3) + 5 * ModularIndexing(x1, 4, 7) - 2 * x2 + s0
    text = printer.print(expr)
    for a, b, c, s in [(10, 100, 3, 2), (0, 27, 0, 5), (8, 1000, 1, 1)]:
        assert _eval(text, x0=a, x1=b, x2=c, s0=s) == a // 3 + 5 * ((b // 4) % 7) - 2 * c + s


def test_prints_products_of_symbols_and_powers() -> None:
    assert TritonIndexPrinter().print(x0 * s0**2 + 3) == "x0*(s0*s0) + 3"


def test_renamed_symbols() -> None:
    indirect = sympy.Symbol("indirect0", integer=True)
    assert TritonIndexPrinter({indirect: "tmp7"}).print(4 * indirect + x0) == "4*tmp7 + x0"


def test_contiguous_access_collapses_to_flat_index() -> None:
    dims = [AxisDims("x", xindex, (x0, x1, x2), (sympy.Integer(2), sympy.Integer(3), sympy.Integer(4)))]
    assert collapse_contiguous(12 * x0 + 4 * x1 + x2, dims) == xindex
    # A trailing run of two dims becomes `xindex % 12`; the outer dim keeps its own variable.
    partial = collapse_contiguous(100 * x0 + 4 * x1 + x2, dims)
    assert partial == 100 * x0 + sympy.Mod(xindex, 12, evaluate=False)
    # A transposed access is left alone.
    assert collapse_contiguous(x0 + 2 * x1 + 6 * x2, dims) == x0 + 2 * x1 + 6 * x2


def test_definitions_recover_each_dim_from_the_flat_index() -> None:
    dims = AxisDims("x", xindex, (x0, x1, x2), (sympy.Integer(2), sympy.Integer(3), sympy.Integer(4)))
    lines = dims.definitions(TritonIndexPrinter())
    for flat in range(24):
        env = {"xindex": flat}
        for line in lines:
            name, text = line.split(" = ")
            env[name] = eval(text, {}, env)
        assert (env["x0"], env["x1"], env["x2"]) == (flat // 12, (flat // 4) % 3, flat % 4)
