"""Softmax over the last dim rounds as eager's CPU kernel does: it multiplies each exponential by the
row sum's reciprocal (`exp / sum`, one more rounding than a division, agreed with eager bit for bit
on about 3% of the rows where the two differ, against about 90% now)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def _softmax_last(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, -1)


def test_last_dim_softmax_rounds_like_eager(backend: CppBackend) -> None:
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(4096, 2, generator=generator)
    compiled = inductor_ir.compile_graph(make_fx(_softmax_last)(x), [x], backends={"cpu": backend})
    result = compiled(x)
    got = result[0] if isinstance(result, (list, tuple)) else result
    want = _softmax_last(x)
    e = torch.exp(x - x.amax(-1, keepdim=True))
    total = e.sum(-1, keepdim=True)
    rows = ((e / total) != (e * (1 / total))).any(-1)  # where the two roundings differ
    assert int(rows.sum()) > 500
    agree = (got[rows] == want[rows]).all(-1).float().mean().item()
    assert agree > 0.8, f"only {agree:.0%} of the rows where division and reciprocal differ match eager"
    torch.testing.assert_close(got, want)
