"""Ops that read a float's sign bit compile and match eager in every float dtype.

g++ 12 crashed (an internal compiler error) on ``std::signbit`` of a float converted from a half
loaded in the same loop (`torch.copysign` on float16): the runtime reads the sign bit itself.
"""

from __future__ import annotations

import pytest
import torch

import frontend

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
PROGRAMS = {
    "copysign": lambda a, b: torch.copysign(a, b * 2),
    "signbit": lambda a, b: torch.signbit(a - b),
    "copysign_scalar": lambda a, b: torch.copysign(a + b, -0.0),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", PROGRAMS)
def test_sign_bit_ops(name: str, dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(3)
    a, b = (torch.randn(5, 7, generator=g).to(dtype) for _ in range(2))
    b[0, :3] = torch.tensor([0.0, -0.0, float("-inf")])
    fn = PROGRAMS[name]
    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    assert torch.equal(compiled(a, b), fn(a, b))
    frontend.reset()
