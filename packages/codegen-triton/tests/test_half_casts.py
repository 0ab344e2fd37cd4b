"""Conversions to bfloat16 and float16 match eager, from every source dtype.

Eager builds a half value from a float32 (c10::BFloat16/Half take a float), so an int64 or float64
is rounded to float32 first; the kernels convert the same way. Triton's interpreter would reinterpret
the bits of an integer (or a float64) converted straight to bfloat16 (9 -> 1.3e-39, -2 -> nan).
Values a half type holds exactly must match bit for bit; the interpreter rounds float32 -> bfloat16
toward zero (a GPU to nearest), so the others are held to bfloat16's tolerance.
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


def _exact(x: torch.Tensor) -> torch.Tensor:
    """Where ``x`` converts to bfloat16 without rounding."""
    return x.to(torch.float64) == x.to(torch.bfloat16).to(torch.float64)


@pytest.mark.parametrize("dtype", SOURCES, ids=str)
def test_conversion_to_half_types_matches_eager(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(7)
    x = _source(dtype, generator)
    h = torch.randn(9, generator=generator).to(torch.bfloat16)
    compiled = inductor_ir.compile_graph(make_fx(_casts)(x, h), [x, h], backends={"cpu": cpu_backend})
    actual = compiled(x, h)
    exact = _exact(x)
    wrong = []
    for name, want in _casts(x, h).items():
        got = actual[name]
        if got.dtype != want.dtype or not torch.equal(got[exact], want[exact]):
            wrong.append(f"{name}: {got[exact].tolist()} != {want[exact].tolist()}")
        elif not torch.allclose(got.double(), want.double(), rtol=2e-2, atol=1e-2, equal_nan=True):
            wrong.append(f"{name}: {got.tolist()} not close to {want.tolist()}")
    assert not wrong, "\n".join(wrong)
