"""`TritonConfig(fallback_random=True)`: random ops run as ATen calls in program order, so dropout,
`rand_like` and friends give eager's numbers bit for bit under the same seed (as `CppBackend`);
without it they are drawn inside the kernels (Philox)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend, TritonConfig
from inductor_ir.backend import RANDOM_OPS


def _draws(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # No transcendental ops around the draws: those may differ from eager in the last bit.
    dropped = torch.nn.functional.dropout(x * 3, p=0.3, training=True)
    uniform, normal = torch.rand_like(x), torch.randn(x.shape)
    coins = torch.bernoulli(uniform * 0.5 + 0.25)
    return dropped * 2, uniform * normal, coins, torch.rand(3)


def test_random_ops_match_eager_bit_for_bit(kiln_cache: Path, cpu_backend: TritonBackend) -> None:
    x = torch.randn(6, 5, generator=torch.Generator().manual_seed(0))
    gm = make_fx(_draws, decomposition_table=inductor_ir.decompositions())(x)
    backend = TritonBackend("cpu", TritonConfig(cache_dir=kiln_cache, fallback_random=True))
    assert backend.eager_ops == RANDOM_OPS
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})
    for seed in (0, 99):
        torch.manual_seed(seed)
        got = compiled(x)
        torch.manual_seed(seed)
        expected = _draws(x)
        for a, b in zip(got, expected, strict=True):
            assert torch.equal(a, b)


def test_default_backend_draws_in_kernels(cpu_backend: TritonBackend) -> None:
    assert not cpu_backend.eager_ops
    x = torch.randn(64, generator=torch.Generator().manual_seed(1))
    gm = make_fx(lambda t: torch.rand_like(t) + t)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": cpu_backend})
    ops = {str(getattr(b, "op", "")) for b in compiled.program.buffers}
    assert "aten.rand_like.default" not in ops  # drawn in the kernel (tl.rand)
    values = compiled(x)
    assert bool(((values - x >= 0) & (values - x < 1)).all())
