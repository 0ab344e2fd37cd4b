"""End to end: outputs equal in value but separate tensors in eager stay separate, with eager's
gradients.

The finding (``.scratch/findings/pyfuzz_62914.py``): a program returned ``[x, y]`` where ``y = x * 2``
was computed with grad and, later, ``x = x * 2`` under ``torch.no_grad()``. Merging repeated calls
made the two outputs one tensor, and marking the no-grad one non-differentiable took the gradient
from the other: no output required grad, and the program had no gradients at all. Compared with
eager on seeded random inputs and cotangents, for the triage backend and the default one (CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import frontend

STRICT = {"fallback_to_eager": False}
BACKENDS = ("aot_eager", "inductor")


def _finding(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    y = x - y * 0.5
    x = torch.tanh(y)
    y = x * 2
    with torch.no_grad():
        x = x * 2
    return [x, y, torch.maximum(x, x)]


def _in_a_dict_as_views(x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
    kept = torch.sin(x * y).view(-1)
    with torch.no_grad():
        dropped = torch.sin(x * y).view(-1)
    return {"dropped": dropped, "kept": kept}


def _twins(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.cos(x + y), torch.cos(x + y)


def _flat(result: Any) -> list[torch.Tensor]:
    return list(result.values()) if isinstance(result, dict) else list(result)


def _run(fn: Callable[..., Any], training: bool) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """The outputs, whether each requires grad, how many memories they use, which moved when the
    first that needs no grad was written into in place, and the inputs' gradients for seeded
    cotangents."""
    g = torch.Generator().manual_seed(62914)
    x, y = (torch.randn(4, 5, generator=g).requires_grad_(training) for _ in range(2))
    with torch.set_grad_enabled(training):
        outputs = _flat(fn(x, y))
    snapshot = [t.detach().clone() for t in outputs]
    memories = len({t.untyped_storage().data_ptr() for t in outputs})
    grads = None
    differentiable = [t for t in outputs if t.requires_grad]
    if differentiable:
        cotangents = [torch.randn(t.shape, generator=g) for t in differentiable]
        grads = list(torch.autograd.grad(differentiable, (x, y), cotangents))
    writable = [t for t in outputs if not t.requires_grad]
    if writable:
        with torch.no_grad():
            writable[0].add_(100.0)  # eager's outputs are separate: no other output moves
    moved = [not torch.equal(t.detach(), s) for t, s in zip(outputs, snapshot)]
    return [*snapshot, torch.tensor([t.requires_grad for t in outputs]), torch.tensor(memories), torch.tensor(moved)], grads


@pytest.mark.usefixtures("fresh_cache")
@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
@pytest.mark.parametrize("fn", [_finding, _in_a_dict_as_views, _twins], ids=lambda fn: fn.__name__)
@pytest.mark.parametrize("backend", BACKENDS)
def test_equal_outputs_stay_separate_tensors(backend: str, fn: Callable[..., Any], training: bool) -> None:
    expected, expected_grads = _run(fn, training)
    got, got_grads = _run(frontend.compile(fn, backend=backend, options=STRICT), training)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    assert (got_grads is None) == (expected_grads is None)
    for a, b in zip(got_grads or [], expected_grads or [], strict=True):
        torch.testing.assert_close(a, b)
