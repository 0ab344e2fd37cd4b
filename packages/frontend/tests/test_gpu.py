"""The GPU tier: the inductor backend with Triton kernels on CUDA (skipped without a GPU)."""

from __future__ import annotations

import pytest
import torch

import frontend

from .models import MLP, TinyResNet

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("fresh_cache")]


@pytest.mark.parametrize("mode", [None, "max-autotune-no-cudagraphs"])
def test_inductor_on_cuda_matches_eager(mode: str | None) -> None:
    model = TinyResNet().cuda().eval()
    compiled = frontend.compile(model, mode=mode, options={"fallback_to_eager": False})
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(8, 3, 16, 16, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-3, atol=1e-3)


def test_training_on_cuda_matches_eager() -> None:
    torch.manual_seed(0)
    model, reference = MLP().cuda(), MLP().cuda()
    reference.load_state_dict(model.state_dict())
    compiled = frontend.compile(model, options={"fallback_to_eager": False})
    x, target = torch.randn(32, 16, device="cuda"), torch.randint(4, (32,), device="cuda")
    torch.nn.functional.cross_entropy(compiled(x), target).backward()
    torch.nn.functional.cross_entropy(reference(x), target).backward()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)


def test_graph_mixing_cpu_and_cuda_falls_back_and_stays_right() -> None:
    def mixed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x.cpu() * 2 + y).cuda()

    x, y = torch.randn(4, device="cuda"), torch.randn(4)
    torch.testing.assert_close(frontend.compile(mixed)(x, y), mixed(x, y))


@pytest.mark.xfail(strict=False, reason="open: on the GPU an int16 product fused into an int64 sum is not "
                   "wrapped to int16 first (found by the fuzzer's cuda target; the interpreter and C++ wrap it)")
def test_narrow_int_product_wraps_before_a_wider_sum() -> None:
    def f(a: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return ((-1) * a).sum(), (a * 3).sum(), (-a).sum()

    a = torch.tensor([[32767], [-32768], [1234]], dtype=torch.int16, device="cuda")
    compiled = frontend.compile(f, options={"fallback_to_eager": False})
    for got, want in zip(compiled(a), f(a)):
        assert torch.equal(got, want), (got, want)
