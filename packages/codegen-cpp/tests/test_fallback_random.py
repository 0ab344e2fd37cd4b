"""``CppConfig(fallback_random=True)``: random ops run as ATen calls in program order (eager's
numbers under the same seed); without it they are generated inside the kernels."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend, CppConfig
from inductor_ir.backend import RANDOM_OPS


def _draws(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The bernoulli draw needs a fused kernel's result, the draws after it do not: the kernel
    # fusing sigmoid with the product of the later draws must not pull them ahead of it.
    coins = torch.bernoulli(torch.sigmoid(x))
    uniform, normal = torch.rand_like(x), torch.randn(x.shape)
    return coins, uniform * normal, torch.rand(3)


def test_random_ops_draw_from_torch_in_eager_order(cache_dir: Path) -> None:
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    gm = make_fx(_draws)(x)
    backend = CppBackend(CppConfig(cache_dir=cache_dir, fallback_random=True))
    assert backend.eager_ops == RANDOM_OPS
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})
    for seed in (0, 99):
        torch.manual_seed(seed)
        got = compiled(x)
        torch.manual_seed(seed)
        expected = _draws(x)
        for a, b in zip(got, expected):
            assert torch.equal(a, b)


def test_default_backend_lowers_random_ops(cache_dir: Path) -> None:
    backend = CppBackend(CppConfig(cache_dir=cache_dir))
    assert not backend.eager_ops
    x = torch.randn(64)
    gm = make_fx(lambda t: torch.rand_like(t) + t)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})
    ops = {str(getattr(b, "op", "")) for b in compiled.program.buffers}
    assert "aten.rand_like.default" not in ops  # drawn in the kernel, from one seed per call
    values = compiled(x)
    assert bool(((values - x >= 0) & (values - x < 1)).all())
