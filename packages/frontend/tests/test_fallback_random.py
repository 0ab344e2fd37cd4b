"""``fallback_random=True`` on CPU: random ops draw from torch's generator in eager's order, so a
compiled function gives bit-identical values (and gradients) to eager under the same seed."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import frontend

STRICT = {"fallback_random": True, "fallback_to_eager": False}


def _random_mix(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Random draws of several kinds (returned as drawn), interleaved with arithmetic on them."""
    uniform = torch.rand(x.shape)
    normal = torch.randn(5, 7)
    dropped = torch.nn.functional.dropout(x.sin(), 0.3, training=True)
    coins = torch.bernoulli(torch.sigmoid(x))
    like = torch.rand_like(x)
    return uniform, uniform + x, normal * 2, dropped, coins, like * torch.randn_like(x) + x


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(7, 7)
        self.dropout = torch.nn.Dropout(0.4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(torch.relu(self.linear(x))) * torch.rand(7)


def _same(got: tuple[torch.Tensor, ...], expected: tuple[torch.Tensor, ...], exact: tuple[int, ...] = ()) -> None:
    """Random numbers bit for bit (the zeros of dropout too); fused arithmetic on them within an ulp."""
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert torch.equal(a == 0, b == 0)
        torch.testing.assert_close(a, b, rtol=3e-7, atol=3e-7)
    assert all(torch.equal(got[k], expected[k]) for k in exact)


def _seeded(fn: Callable[..., tuple[torch.Tensor, ...]], seed: int, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(seed)
    return fn(*args)


@pytest.mark.usefixtures("fresh_cache")
def test_rand_randn_dropout_match_eager_bit_for_bit_with_gradients() -> None:
    x = torch.randn(5, 7, generator=torch.Generator().manual_seed(1), requires_grad=True)
    compiled = frontend.compile(_random_mix, options=STRICT, fullgraph=True)
    for seed in (0, 1234):
        got = _seeded(compiled, seed, x)
        expected = _seeded(_random_mix, seed, x)
        _same(got, expected, exact=(0, 2, 4))
        (grad,) = torch.autograd.grad(sum(t.sum() for t in got), x)
        (expected_grad,) = torch.autograd.grad(sum(t.sum() for t in expected), x)
        torch.testing.assert_close(grad, expected_grad, rtol=1e-6, atol=1e-6)
    with torch.no_grad():
        _same(_seeded(compiled, 7, x), _seeded(_random_mix, 7, x), exact=(0, 2, 4))


@pytest.mark.usefixtures("fresh_cache")
def test_module_in_training_under_a_config_patch() -> None:
    net = _Net().train()
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(2))
    with frontend.config.patch(fallback_random=True):
        compiled = frontend.compile(net, options={"fallback_to_eager": False}, fullgraph=True)
    got = _seeded(lambda t: (compiled(t),), 42, x)
    expected = _seeded(lambda t: (net(t),), 42, x)
    _same(got, expected)
    got[0].sum().backward()
    compiled_grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    expected[0].sum().backward()
    for a, b in zip(compiled_grads, (p.grad for p in net.parameters())):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.usefixtures("fresh_cache")
def test_without_fallback_random_random_ops_are_generated_in_kernels() -> None:
    compiled = frontend.compile(lambda x: torch.rand(x.shape) + x, options={"fallback_to_eager": False})
    x = torch.randn(64)
    values = _seeded(lambda t: (compiled(t),), 0, x)[0] - x
    assert bool(((values >= 0) & (values < 1)).all())
    assert not torch.equal(values, _seeded(lambda t: (torch.rand(t.shape),), 0, x)[0])
