"""SymPy index expressions printed as C++: structure, and floor semantics for negative values."""

from __future__ import annotations

import sympy

from codegen_cpp import cpp_index
from inductor_ir import FloorDiv, ModularIndexing

X0, X1 = (sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(2))
S0 = sympy.Symbol("s0", integer=True, positive=True)
N = sympy.Symbol("n", integer=True)  # may be negative


def test_affine_index() -> None:
    assert cpp_index(X0 + 16 * X1 + 3) == "x0 + 16*x1 + 3"
    assert cpp_index(S0 * X0 - X1) == "s0*x0 - x1"


def test_nonnegative_floor_div_and_modular_indexing_use_c_operators() -> None:
    assert cpp_index(FloorDiv(X0, S0)) == "(x0 / s0)"
    assert cpp_index(ModularIndexing(X0, 4, S0)) == "((x0 / 4) % s0)"
    assert cpp_index(ModularIndexing(X0, 1, 7)) == "(x0 % 7)"


def test_possibly_negative_division_rounds_toward_negative_infinity() -> None:
    assert cpp_index(FloorDiv(N, 4)) == "kiln::floordiv<int64_t>(n, 4)"
    assert cpp_index(sympy.Mod(N, 3)) == "kiln::floormod<int64_t>(n, 3)"
    assert cpp_index(sympy.floor(N / 5)) == "kiln::floordiv<int64_t>(n, 5)"


def test_large_constants_are_int64() -> None:
    assert cpp_index(sympy.Integer(2**40) * X0) == "INT64_C(1099511627776)*x0"


def test_multiples_of_symbolic_divisors_with_max_are_taken_by_their_factors() -> None:
    import sympy

    from codegen_cpp.codegen.indexing import _multiple_of

    s0, x0 = sympy.symbols("s0 x0", integer=True, positive=True)
    padded = sympy.Max(s0 - 3, 0) + 1  # a SAME-padding size
    assert _multiple_of(3 * x0 * padded, padded) == 3 * x0
    assert _multiple_of(x0 * padded, padded) == x0
    assert _multiple_of(x0 + padded, padded) is None  # not a product: left to the division
    assert _multiple_of(x0, padded) is None  # lacks the divisor's symbols
    assert _multiple_of(6 * x0 * s0, 2 * s0) == 3 * x0


def test_torchs_bitwise_and_modulus_functions_of_sizes_compile_and_match_eager() -> None:
    """``(n << 1) ^ 1`` of a size traces as torch's ``BitwiseFn_bitwise_xor`` over its own ``Mod``:
    neither printed, so the graph ran eagerly (pyfuzz, ``int_arith``)."""
    import torch
    from torch.utils._sympy.functions import BitwiseFn_bitwise_xor, Mod

    import frontend

    assert cpp_index(BitwiseFn_bitwise_xor(2 * Mod(S0**2, 7), 1)) == "((2*(kiln::floormod<int64_t>(s0*s0, 7))) ^ 1)"

    def fn(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0] ** 2 % 7
        return x * ((n << 1) ^ 1) + (x.shape[0] & 6) + (x.shape[0] | 9)

    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    generator = torch.Generator().manual_seed(0)
    for rows in (4, 4, 6, 7, 11):
        x = torch.randn(rows, 3, generator=generator)
        torch.testing.assert_close(compiled(x), fn(x))


def test_int_of_a_true_division_of_sizes_compiles_and_matches_eager() -> None:
    """``int(n / 2)`` of a size traces as torch's ``TruncToInt(IntTrueDiv(...))``: not printed, so
    the graph ran eagerly (pyfuzz, ``int_arith``)."""
    import torch

    import frontend

    def fn(x: torch.Tensor) -> torch.Tensor:
        n = int(int((x.shape[0] - 9) / 2) / 2)
        return x * n + int(x.shape[0] / 3)

    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    generator = torch.Generator().manual_seed(0)
    for rows in (4, 4, 6, 7, 11, 23):
        x = torch.randn(rows, 3, generator=generator)
        torch.testing.assert_close(compiled(x), fn(x))


def test_the_absolute_value_of_a_size_compiles_and_matches_eager() -> None:
    """``abs(n - 3)`` of a size traces as SymPy's ``Abs``: printed neither in C++ nor by the wrapper, so
    the graph ran eagerly (pyfuzz)."""
    import torch

    import frontend

    def fn(x: torch.Tensor) -> torch.Tensor:
        n = abs(x.shape[0] - 3)
        return torch.arange(n, dtype=torch.float32) * 2 + x[:n].sum()

    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    generator = torch.Generator().manual_seed(0)
    for rows in (6, 7, 9, 2):
        x = torch.randn(rows, generator=generator)
        torch.testing.assert_close(compiled(x), fn(x))
