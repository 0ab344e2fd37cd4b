"""In-place writes eager's autograd does not record, end to end under aot_eager and inductor on the
CPU: under `torch.no_grad()`, through `.data`, through a `.detach()` alias, a parameter clipped in
place, and an optimizer-style update. The tensor takes the written value and keeps its gradient path
(aotgrad's `tracing/hidden_writes.py`); compared with eager on seeded random inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import frontend

STRICT = {"fallback_to_eager": False}
BACKENDS = ("aot_eager", "inductor")


def _no_grad(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x * w)
    with torch.no_grad():
        h.clamp_(-0.5, 0.5)
    return h * 3


def _matmul_no_grad(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x.reshape(3, 4) @ w.reshape(4, 3)
    with torch.no_grad():
        h.clamp_(-1, 1)
    return h


def _data(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x * w)
    h.data.clamp_(-0.5, 0.5)
    return h * 3


def _detach_alias(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x * w)
    h.detach().clamp_(-0.5, 0.5)
    return h * 3


def _clipped_weight(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
    return x * w


def _optimizer_style(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        w.add_(torch.cos(x), alpha=-0.1)
    return torch.tanh(x * w)


CASES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "no_grad": _no_grad,
    "matmul_no_grad": _matmul_no_grad,
    "data": _data,
    "detach_alias": _detach_alias,
    "clipped_weight": _clipped_weight,
    "optimizer_style": _optimizer_style,
}


def _step(fn: Callable[..., torch.Tensor], seed: int) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(12, generator=g).requires_grad_()
    w = torch.randn(12, generator=g).requires_grad_()
    out = fn(x * 1, w)
    assert out.requires_grad
    out.sum().backward()
    return [out.detach(), w.detach().clone(), x.grad, w.grad, w.is_leaf]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_hidden_write_as_eager(name: str, backend: str) -> None:
    fn = CASES[name]
    compiled = frontend.compile(fn, backend=backend, options=STRICT)
    try:
        for seed in (0, 1):
            expected = _step(fn, seed)
            actual = _step(compiled, seed)
            for got, want in zip(actual, expected):
                if isinstance(want, torch.Tensor):
                    torch.testing.assert_close(got, want)
                else:
                    assert got == want
    finally:
        frontend.reset()
