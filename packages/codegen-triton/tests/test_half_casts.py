"""Conversions to bfloat16 and float16 match eager, from every source dtype.

Eager builds a half value from a float32 (c10::BFloat16/Half take a float), so an int64 or float64
is rounded to float32 first; the kernels convert the same way. Triton's interpreter would reinterpret
the bits of an integer (or a float64) converted straight to bfloat16 (9 -> 1.3e-39, -2 -> nan).
Every value must match bit for bit: float32 -> bfloat16 rounds to nearest even, as on a GPU (the
interpreter's own cast truncates; interpreted kernels round through `libdevice`).
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

SOURCES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float64)


def _casts(x: torch.Tensor, h: torch.Tensor) -> dict[str, torch.Tensor]:
    return {
        "bf16": x.to(torch.bfloat16),
        "f16": x.to(torch.float16),
        "bf16+1": x.to(torch.bfloat16) + 1,
        "where": torch.where(x.to(torch.float32) > 0, x.to(torch.bfloat16), h),
        "x>=h": x >= h[0].to(torch.float16),
    }


def _source(dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, (4, 9), generator=generator).bool()
    if dtype == torch.float64:
        # Half of the values exact in bfloat16 (k / 8 with |k| < 256), half arbitrary.
        exact = torch.randint(-255, 256, (2, 9), generator=generator, dtype=torch.int64) / 8
        return torch.cat([exact, torch.randn(2, 9, generator=generator, dtype=torch.float64) * 1000])
    info = torch.iinfo(dtype)
    low, high = max(info.min, -256), min(info.max, 256)  # exact in bfloat16
    x = torch.randint(low, high + 1, (4, 9), generator=generator, dtype=torch.int64)
    x[0, :6] = torch.tensor([9, 1, -2, 6, 0, 100]).clamp(low, high)
    if dtype in (torch.int32, torch.int64):  # a row of wide values (2**24 + 1 and such)
        x[3] = torch.randint(-(2**30), 2**30, (9,), generator=generator, dtype=torch.int64)
        x[3, :2] = torch.tensor([2**24 + 1, -(2**25) - 3])
    return x.to(dtype)


@pytest.mark.parametrize("dtype", SOURCES, ids=str)
def test_conversion_to_half_types_matches_eager(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(7)
    x = _source(dtype, generator)
    h = torch.randn(9, generator=generator).to(torch.bfloat16)
    compiled = inductor_ir.compile_graph(make_fx(_casts)(x, h), [x, h], backends={"cpu": cpu_backend})
    actual = compiled(x, h)
    wrong = []
    for name, want in _casts(x, h).items():
        got = actual[name]
        if got.dtype != want.dtype or not torch.equal(got, want):
            wrong.append(f"{name}: {got.tolist()} != {want.tolist()}")
    assert not wrong, "\n".join(wrong)


def _rounded_then_floored(x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    b = x.to(torch.bfloat16)
    return {
        "floordiv": torch.div(b, -1.5, rounding_mode="floor"),
        "product": b * y.to(torch.bfloat16),
        "round_trip": b.to(torch.float32),
    }


def test_float32_to_bfloat16_rounds_to_nearest_even(cpu_backend: TritonBackend) -> None:
    # Values just above a bfloat16 step (1.5070769 -> 1.5078125: floor(-1.005) is -2, not the
    # truncated 1.5's -1), ties, a subnormal, the largest float32 (-> inf) and NaN.
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(64, generator=generator) * 3
    x[:8] = torch.tensor([1.5070768594741821, 1.00390625, 1.01171875, -2.0078125, 1e-39, 3.4e38, float("nan"), -0.0])
    y = torch.randn(64, generator=generator)
    compiled = inductor_ir.compile_graph(make_fx(_rounded_then_floored)(x, y), [x, y], backends={"cpu": cpu_backend})
    actual = compiled(x, y)
    for name, want in _rounded_then_floored(x, y).items():
        torch.testing.assert_close(actual[name], want, rtol=0, atol=0, equal_nan=True, msg=name)
