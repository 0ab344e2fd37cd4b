"""Pointwise lowerings: interpret(lower(make_fx(fn))) matches eager on fresh random inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from inductor_ir_testing import check_interpret, rand

import inductor_ir

FLOAT_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "tanh": torch.tanh, "exp": torch.exp,
    "expm1": torch.expm1, "exp2": torch.exp2, "log_abs": lambda x: torch.log(x.abs() + 1),
    "log1p_abs": lambda x: torch.log1p(x.abs()), "log2_abs": lambda x: torch.log2(x.abs() + 1),
    "sqrt_abs": lambda x: torch.sqrt(x.abs()), "rsqrt_abs": lambda x: torch.rsqrt(x.abs() + 1),
    "sigmoid": torch.sigmoid, "erf": torch.erf, "erfc": torch.erfc, "atan": torch.atan,
    "asin": lambda x: torch.asin(x.clamp(-1, 1)), "sinh": torch.sinh, "cosh": torch.cosh,
    "asinh": torch.asinh, "reciprocal": lambda x: torch.reciprocal(x + 10),
}  # fmt: skip

SAME_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "sign": torch.sign,
    "floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc, "round": torch.round,
}  # fmt: skip

BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
    "minimum": torch.minimum, "add_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "rsub": lambda a, b: torch.rsub(a, b, alpha=2), "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
    "le": torch.le, "gt": torch.gt, "ge": torch.ge, "where": lambda a, b: torch.where(a > b, a, b),
}  # fmt: skip

LAYOUTS = ["contiguous", "transposed", "sliced"]


@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_float_unary(name: str, dtype: torch.dtype) -> None:
    fn = FLOAT_UNARY[name]
    check_interpret(fn, lambda: [rand(5, 7, dtype=dtype)])


@pytest.mark.parametrize("name", sorted(SAME_UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16])
def test_same_dtype_unary(name: str, dtype: torch.dtype) -> None:
    fn = SAME_UNARY[name]
    check_interpret(lambda x: fn(x * 3), lambda: [rand(4, 6, dtype=dtype)])


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_binary_layouts_and_broadcast(name: str, layout: str) -> None:
    fn = BINARY[name]
    check_interpret(fn, lambda: [rand(4, 6, layout=layout), rand(6)])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (torch.float16, torch.float32),
        (torch.int64, torch.float32),
        (torch.bool, torch.int64),
        (torch.int64, torch.int64),
        (torch.bfloat16, torch.bfloat16),
        (torch.bool, torch.bool),
    ],
)
def test_type_promotion(a: torch.dtype, b: torch.dtype) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        return x + y, x * y, x == y, torch.maximum(x.to(y.dtype), y) if y.dtype != torch.bool else x | y

    check_interpret(fn, lambda: [rand(3, 4, dtype=a), rand(1, 4, dtype=b)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_division_modes(dtype: torch.dtype) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        y = torch.where(y == 0, torch.ones_like(y), y)
        return (x / y, torch.div(x, y, rounding_mode="floor"), torch.div(x, y, rounding_mode="trunc"),
                torch.remainder(x, y), torch.fmod(x, y))  # fmt: skip

    check_interpret(fn, lambda: [rand(4, 5, dtype=dtype) * 3, rand(4, 5, dtype=dtype)])


def test_scalars_clamp_pow_and_logic() -> None:
    def fn(x: torch.Tensor, m: torch.Tensor) -> Any:
        return (x.clamp(-0.5, 0.7), x.clamp_min(0.1), torch.pow(x.abs(), 2.5), 2 ** x, x * 2.5 - 1,
                torch.logical_and(m, x > 0), ~m, torch.logical_not(x), torch.isnan(x.log()), x.sigmoid() > 0.5)  # fmt: skip

    check_interpret(fn, lambda: [rand(3, 5), rand(3, 5, dtype=torch.bool)])


def test_casts_and_copies() -> None:
    def fn(x: torch.Tensor, i: torch.Tensor) -> Any:
        return x.to(torch.float16), x.to(torch.int64), i.to(torch.float32), i.bool(), x.clone(), x.t().contiguous()

    check_interpret(fn, lambda: [rand(4, 6) * 4, rand(4, 6, dtype=torch.int64)])


def test_nan_clamp_bounds_give_the_installed_torchs_values() -> None:
    """A NaN number as a clamp bound runs ATen's kernel (its result differs between torch releases)."""
    nan = float("nan")

    def fn(x: torch.Tensor) -> Any:
        return (torch.clamp(x, min=nan), torch.clamp(x, max=nan), torch.clamp(x, min=nan, max=0.5),
                torch.clamp_min(x, nan), torch.clamp_max(x, nan), x.clamp(-0.5, 0.5))  # fmt: skip

    program = check_interpret(fn, lambda: [rand(3, 5)], allow_fallback=True)
    fallbacks = [b for b in program.buffers if type(b) is inductor_ir.FallbackKernel]
    assert len(fallbacks) == 5
