"""Graphs compiled under `torch.autocast`: the casts applied once, as eager applies them.

aotgrad traces a graph under the caller's autocast, so its ATen ops hold autocast's casts. Every
later trace (the second tracing pass, the joint trace, the code generators) and every run must
not apply autocast again: a matmul inside a `torch.autocast(enabled=False)` block (as LLaMA's
rotary embedding computes its angles) would otherwise run in bfloat16, and positions past 256
lose their integer precision.
"""

from __future__ import annotations

import pytest
import torch

import frontend

BACKENDS = ("aot_eager", "inductor")


def rotary_angles(inv_freq: torch.Tensor, positions: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.autocast("cpu", enabled=False):
        freqs = (inv_freq.float()[None, :, None] @ positions.float()[:, None, :]).transpose(1, 2)
    projected = x @ x.transpose(-1, -2)  # autocast applies here: bfloat16
    return freqs.cos(), freqs.sin() * 2, projected


def _inputs(requires_grad: bool = False) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    inv_freq = 1.0 / (500000 ** (torch.arange(0, 64, 2).float() / 64))
    inv_freq = (inv_freq * (1 + 0.01 * torch.rand(32, generator=g))).requires_grad_(requires_grad)
    positions = torch.arange(600)[None].expand(2, 600)
    x = torch.randn(2, 16, 8, generator=g).requires_grad_(requires_grad)
    return inv_freq, positions, x


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_block_inside_autocast_keeps_float32(backend: str) -> None:
    inputs = _inputs()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        expected = rotary_angles(*inputs)
        compiled = frontend.compile(rotary_angles, backend=backend)
        for _ in range(2):  # the second call runs the cached graph under the caller's autocast
            actual = compiled(*inputs)
            assert [a.dtype for a in actual] == [e.dtype for e in expected] == [torch.float32] * 2 + [torch.bfloat16]
            torch.testing.assert_close(actual[0], expected[0], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(actual[1], expected[1], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(actual[2], expected[2], rtol=1.6e-2, atol=1e-2)
    frontend.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_training_under_autocast_matches_eager(backend: str) -> None:
    def loss_of(fn, inputs):  # type: ignore[no-untyped-def]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cos, sin, projected = fn(*inputs)
            loss = (cos * sin).sum() + projected.float().square().mean()
        loss.backward()
        return loss.detach(), inputs[0].grad, inputs[2].grad

    expected = loss_of(rotary_angles, _inputs(requires_grad=True))
    actual = loss_of(frontend.compile(rotary_angles, backend=backend), _inputs(requires_grad=True))
    torch.testing.assert_close(actual[0], expected[0], rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(actual[1], expected[1], rtol=1e-4, atol=1e-2)  # float32 path: tight
    torch.testing.assert_close(actual[2], expected[2], rtol=2e-2, atol=2e-2)  # through bfloat16 matmuls
    frontend.reset()
