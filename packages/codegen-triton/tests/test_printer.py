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


class _CInt(int):
    """An int whose ``//`` and ``%`` truncate toward zero, as Triton's integer ops do."""

    def __floordiv__(self, other: int) -> _CInt:  # type: ignore[override]
        q = abs(int(self)) // abs(int(other))
        return _CInt(q if (int(self) < 0) == (int(other) < 0) else -q)

    def __mod__(self, other: int) -> _CInt:  # type: ignore[override]
        return _CInt(int(self) - int(other) * int(self // other))

    def __add__(self, other: int) -> _CInt:  # type: ignore[override]
        return _CInt(int(self) + int(other))

    __radd__ = __add__

    def __sub__(self, other: int) -> _CInt:  # type: ignore[override]
        return _CInt(int(self) - int(other))

    def __rsub__(self, other: int) -> _CInt:  # type: ignore[override]
        return _CInt(int(other) - int(self))

    def __mul__(self, other: int) -> _CInt:  # type: ignore[override]
        return _CInt(int(self) * int(other))

    __rmul__ = __mul__

    def __neg__(self) -> _CInt:
        return _CInt(-int(self))


def _eval_truncating(text: str, **values: int) -> int:
    """`text` evaluated with C's truncating ``//`` and ``%`` (integer literals included)."""
    import re

    source = re.sub(r"(?<![\w.])(\d+)", r"_C(\1)", text)
    return int(eval(source, {"_C": _CInt}, {k: _CInt(v) for k, v in values.items()}))


def test_a_dividend_that_may_be_negative_keeps_floor_semantics_under_truncating_ops() -> None:
    """A roll's ``Mod(-5, s)`` and an indirect (maybe negative) index: Triton's ``%`` and ``//``
    truncate, so these print with a correction (``-5 % 2`` is 1 in SymPy, -1 in Triton)."""
    size = sympy.Symbol("s1", integer=True, positive=True)
    indirect = sympy.Symbol("indirect0", integer=True)
    printer = TritonIndexPrinter()
    cases = [
        (sympy.Mod(-5, size), lambda i, s: -5 % s),
        (sympy.Mod(indirect, size), lambda i, s: i % s),
        (FloorDiv(indirect, 4), lambda i, s: i // 4),
        (ModularIndexing(indirect, 3, size), lambda i, s: (i // 3) % s),
    ]
    for expr, expected in cases:
        text = printer.print(expr)
        for i in range(-9, 10):
            for s in (1, 2, 3, 7):
                assert _eval_truncating(text, indirect0=i, s1=s) == expected(i, s), (expr, text, i, s)
    assert printer.print(FloorDiv(x0, 3)) == "x0 // 3"  # known nonnegative: no correction


def test_prints_torchs_bitwise_and_modulus_functions_of_sizes() -> None:
    """``(n << 1) ^ 1`` of a size traces as torch's ``BitwiseFn_bitwise_xor`` over its own ``Mod``:
    neither printed, so the graph ran eagerly (pyfuzz, ``int_arith``)."""
    from torch.utils._sympy.functions import (
        BitwiseFn_bitwise_and,
        BitwiseFn_bitwise_or,
        BitwiseFn_bitwise_xor,
        Mod,
        PythonMod,
    )

    printer = TritonIndexPrinter()
    expr = BitwiseFn_bitwise_xor(2 * Mod(s0**2, 7), 1) + BitwiseFn_bitwise_and(x0, 6) + BitwiseFn_bitwise_or(x1, 9)
    text = printer.print(expr + PythonMod(x2 - 9, 4))
    for a, b, c, s in [(10, 100, 3, 2), (0, 27, 0, 5), (7, 1000, 12, 11)]:
        assert _eval(text, x0=a, x1=b, x2=c, s0=s) == ((2 * (s * s % 7)) ^ 1) + (a & 6) + (b | 9) + (c - 9) % 4


def test_prints_int_of_a_true_division_of_sizes_as_a_truncating_division() -> None:
    from torch.utils._sympy.functions import IntTrueDiv, TruncToInt

    text = TritonIndexPrinter().print(TruncToInt(IntTrueDiv(TruncToInt(IntTrueDiv(s0 + 9, 2)), 2)) + x0)
    assert text == "((((s0 + 9) // 2)) // 2) + x0" or "//" in text
    for a, s in [(0, 0), (3, 5), (7, 12)]:
        assert _eval(text, x0=a, s0=s) == int(int((s + 9) / 2) / 2) + a  # nonnegative: Python's // agrees


def test_prints_the_absolute_value_of_sizes() -> None:
    """``abs(n - 3)`` of a size traces as SymPy's ``Abs``: not printed, so the graph ran eagerly (pyfuzz)."""
    text = TritonIndexPrinter().print(sympy.Abs(s0 - 3) + x0)
    assert "tl.abs(" in text
    for a, s in [(0, 0), (3, 5), (7, 1)]:
        assert _eval(text.replace("tl.abs", "abs"), x0=a, s0=s) == abs(s - 3) + a
