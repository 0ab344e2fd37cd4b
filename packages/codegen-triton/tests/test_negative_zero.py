"""Negative zeros keep their sign in Triton kernels, as in eager.

Triton's ``-x`` is ``0 - x`` (``-(+0.0)`` came out +0.0) and ``tl.full`` writes +0.0 for any value
equal to 0 (a -0.0 constant became +0.0): ``copysign(x, -zeros)`` returned ``|x|``.
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def _signs(x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return -z, torch.copysign(x, -z), torch.copysign(x, torch.full_like(x, -0.0)), x / -0.0, x * -0.0


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_negative_zero_keeps_its_sign(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(53)
    x = torch.randn(20, generator=generator, dtype=dtype)
    x[:3] = torch.tensor([0.0, -0.0, float("inf")], dtype=dtype)
    z = torch.zeros(20, dtype=dtype)
    compiled = inductor_ir.compile_graph(make_fx(_signs)(x, z), [x, z], backends={"cpu": cpu_backend})
    for k, (got, want) in enumerate(zip(compiled(x, z), _signs(x, z), strict=True)):
        assert torch.equal(got.isnan(), want.isnan()), f"result {k}"
        assert torch.equal(got.nan_to_num(), want.nan_to_num()), f"result {k}: {got} != {want}"
        numbers = ~want.isnan()
        assert torch.equal(got.signbit()[numbers], want.signbit()[numbers]), f"result {k}: {got} != {want}"
