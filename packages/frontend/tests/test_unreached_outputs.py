"""End to end: a compiled graph whose outputs the loss reaches only in part trains as eager does.

The finding (``.scratch/findings/zero_tangent_nan.py``): the first graph's only output gets no
gradient (the second graph never uses it), and its backward took zeros for it, times the saved
``inf``: NaN added into the real gradient, where eager never runs that backward. Compared with eager
on seeded random inputs, for the triage backend and the default one (CPU), compiled cold and loaded
from the graph cache (whose regions trace their backward graph again for such calls).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import frontend
import frontend.graph_cache.lookup as lookup

STRICT = {"fallback_to_eager": False}


def _first(y: torch.Tensor) -> torch.Tensor:
    return y * float("inf")


def _second(a: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    dead = a * 0.5  # noqa: F841 (never reaches the output: `a` gets no gradient)
    return y.sin()


def _heads(x: torch.Tensor, w: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = torch.tanh(x @ w)
    return hidden.sum(-1), (hidden * v * float("inf")).exp()


def _leaves(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).requires_grad_() for shape in shapes]


def _chained_grad(backend: str, y: torch.Tensor) -> torch.Tensor | None:
    first = frontend.compile(_first, backend=backend, options=STRICT)
    second = frontend.compile(_second, backend=backend, options=STRICT)
    y = y.detach().clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        second(first(y), y).sum().backward()
    return y.grad


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_findings_repro_matches_eager_cold_and_from_the_graph_cache(backend: str, cache_dir: Path) -> None:
    for seed in (0, 1):  # compiled, then loaded from the cache as by a new process
        (y,) = _leaves(seed, (6,))
        expected = _second(_first(y), y)
        (expected_grad,) = torch.autograd.grad(expected.sum(), y)
        got = _chained_grad(backend, y)
        assert got is not None
        torch.testing.assert_close(got, expected_grad)
        if backend == "inductor":
            hits = frontend.compile_times("cache").get("graph", {}).get("hits", 0)  # type: ignore[union-attr]
            assert hits == (2 if seed else 0)
        frontend.reset()
        lookup._STORES.clear()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_input_only_the_unused_output_reads_gets_no_gradient(backend: str, fresh_cache: None) -> None:
    compiled = frontend.compile(_heads, backend=backend, options=STRICT)
    for seed in (2, 3):
        inputs = _leaves(seed, (4, 6), (6, 3), (4, 3))
        expected = [t.detach().clone().requires_grad_() for t in inputs]
        compiled(*inputs)[0].sum().backward()
        _heads(*expected)[0].sum().backward()
        for got, want in zip(inputs[:2], expected[:2]):
            assert got.grad is not None and want.grad is not None
            torch.testing.assert_close(got.grad, want.grad)
        assert inputs[2].grad is None and expected[2].grad is None
