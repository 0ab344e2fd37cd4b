"""Float floor division, sign and int32/int64 wrapping match eager bit for bit in C++ kernels.

Eager's float floor division comes from the exact fmod, not floor(a / b): inf // 100 is nan,
-1 // inf is -1. Eager's sign of NaN is 0. Signed int arithmetic wraps in eager; without -fwrapv
g++ folds `(x + x) != 0` to `x != 0`.
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend

_SPECIAL = [float("inf"), float("-inf"), float("nan"), -0.0, 0.0, 1e300, -1e300, 1e-300, -1.0, 5.0]


def _floats(x: torch.Tensor, y: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.div(x, y, rounding_mode="floor"), x // s, torch.floor_divide(x, 100.0), torch.sign(x / y)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_float_floor_div_and_sign_match_eager(backend: CppBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(23)
    # 40 columns: vector lanes and the scalar tail both see every special value.
    x = torch.randn(len(_SPECIAL), 40, generator=generator, dtype=torch.float64) * 100
    x[:, 0] = torch.tensor(_SPECIAL)
    x[0, :len(_SPECIAL)] = torch.tensor(_SPECIAL)
    y = torch.randn(40, generator=generator, dtype=torch.float64) * 3
    y[:len(_SPECIAL)] = torch.tensor(_SPECIAL)
    x, y, s = x.to(dtype), y.to(dtype), torch.tensor(float("-inf"), dtype=dtype)
    compiled = inductor_ir.compile_graph(make_fx(_floats)(x, y, s), [x, y, s], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, y, s), _floats(x, y, s), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got.isnan(), want.isnan()), f"result {k}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {k}: {got} != {want}"


def _wrapping(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t = x + x
    return torch.logical_xor(t, y), t.bool(), (x * 2) == 0


@pytest.mark.parametrize("dtype", (torch.int32, torch.int64), ids=str)
def test_signed_overflow_wraps_like_eager(backend: CppBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(29)
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (3, 37), generator=generator, dtype=dtype)
    x[:, 0], x[:, 1], x[0, 2:20] = info.min, info.max, info.min
    y = torch.randint(0, 2, (37,), generator=generator, dtype=torch.uint8)
    compiled = inductor_ir.compile_graph(make_fx(_wrapping)(x, y), [x, y], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(x, y), _wrapping(x, y), strict=True)):
        assert torch.equal(got, want), f"result {k}: {got} != {want}"
