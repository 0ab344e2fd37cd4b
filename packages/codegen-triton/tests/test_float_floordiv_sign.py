"""Float floor division and sign match eager in Triton kernels.

Eager's float floor division comes from the exact fmod, not floor(a / b): inf // 100 is nan,
-1 // inf is -1, 1e300 // -1e-300 is -inf. Eager's sign of NaN is 0.
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

_SPECIAL = [float("inf"), float("-inf"), float("nan"), -0.0, 0.0, 1e300, -1e300, 1e-300, -1.0, 5.0]


def _floats(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.div(x, y, rounding_mode="floor"), torch.floor_divide(x, 100.0), torch.sign(x / y)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_float_floor_div_and_sign_match_eager(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(31)
    x = torch.randn(len(_SPECIAL), 12, generator=generator, dtype=torch.float64) * 100
    x[:, 0] = torch.tensor(_SPECIAL)
    y = torch.randn(12, generator=generator, dtype=torch.float64) * 3
    y[:len(_SPECIAL)] = torch.tensor(_SPECIAL)
    x, y = x.to(dtype), y.to(dtype)
    compiled = inductor_ir.compile_graph(make_fx(_floats)(x, y), [x, y], backends={"cpu": cpu_backend})
    for k, (got, want) in enumerate(zip(compiled(x, y), _floats(x, y), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got.isnan(), want.isnan()), f"result {k}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {k}: {got} != {want}"
        numbers = ~want.isnan()  # a NaN's sign bit is not specified
        assert torch.equal(got.signbit()[numbers], want.signbit()[numbers]), f"result {k}: signs of zeros"


def _quotients(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x / y, torch.div(x, x, rounding_mode="trunc"), torch.div(x * 3, x, rounding_mode="floor"), (x * 7) / 7


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16), ids=str)
def test_float_division_is_correctly_rounded_on_the_gpu(gpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    """Triton's float32 `/` is div.full.f32 (up to 2 ulp): 4.6875 / 0.9375 gave 5.0000005 and
    trunc(x / x) 0 (fuzz 3927b64fea, bba81c3776). Eager divides exactly rounded, and by a number
    (`(x * 7) / 7`) multiplies by its reciprocal rounded in float32."""
    generator = torch.Generator().manual_seed(37)
    x = (torch.randn(4096, generator=generator) * 1000).to(dtype)
    y = (torch.randn(4096, generator=generator) * 3).to(dtype)
    x[0], y[0] = 4.6875, 0.9375
    x, y = x.cuda(), y.cuda()
    compiled = inductor_ir.compile_graph(make_fx(_quotients)(x, y), [x, y], backends={"cuda": gpu_backend})
    for k, (got, want) in enumerate(zip(compiled(x, y), _quotients(x, y), strict=True)):
        assert torch.equal(got, want), f"result {k}: {(got != want).sum().item()} values differ"
