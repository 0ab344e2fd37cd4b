"""Float `remainder` (Python's %, the sign of the divisor) matches eager bit for bit.

Eager takes fmod (exact) and adds the divisor where the signs differ. `a - floor(a / b) * b`
rounds the quotient: `int64 % float32` lost low bits and `1e30 % -129` gave 0.0 instead of -3.0.
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def _remainders(x: torch.Tensor, y: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return x % y, torch.remainder(x, -129), i % y[0], torch.remainder(x, 0.75), torch.fmod(x, y)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.float16), ids=str)
def test_float_remainder_matches_eager(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(17)
    x = torch.randn(4, 8, generator=generator, dtype=torch.float64) * 1000
    x[0, :4] = torch.tensor([1e30, -1e30, 3e9, -7.25]) if dtype != torch.float16 else torch.tensor([6e4, -6e4, 3e3, -7.25])
    x = x.to(dtype)
    y = (torch.randn(8, generator=generator, dtype=torch.float64) * 3).to(dtype)
    i = torch.randint(0, 2**20 if dtype != torch.float16 else 2**11, (4, 8), generator=generator)  # exact in dtype
    compiled = inductor_ir.compile_graph(make_fx(_remainders)(x, y, i), [x, y, i], backends={"cpu": cpu_backend})
    for k, (got, want) in enumerate(zip(compiled(x, y, i), _remainders(x, y, i), strict=True)):
        assert got.dtype == want.dtype and torch.equal(got, want), f"result {k}: {got} != {want}"
