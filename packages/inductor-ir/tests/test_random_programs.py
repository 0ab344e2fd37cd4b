"""Randomly composed programs through compile_graph (fusion, reuse, in-place) vs eager."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir

N = 6
STEPS: list[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = [
    lambda a, b: a.sin() + b,
    lambda a, b: a * b.t(),
    lambda a, b: torch.mm(a, b) / 4,
    lambda a, b: torch.softmax(a, -1) - b,
    lambda a, b: a - a.mean(0, keepdim=True),
    lambda a, b: torch.cat([a[:, :3], b[:, 3:]], 1),
    lambda a, b: torch.where(a > b, a, b.exp()),
    lambda a, b: a.amax(1, keepdim=True) * b,
    lambda a, b: a.flip(0) + b.relu(),
    lambda a, b: (a + b).tanh(),
]


def _program(seed: int) -> Callable[..., Any]:
    rng = random.Random(seed)
    plan = [(rng.randrange(len(STEPS)), rng.randrange(10), rng.randrange(10)) for _ in range(8)]
    outputs = sorted(rng.sample(range(len(plan)), 2))

    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        values = [x, y]
        for step, i, j in plan:
            values.append(STEPS[step](values[i % len(values)], values[j % len(values)]))
        return tuple(values[2 + k] for k in outputs) + (values[-1],)

    return fn


@pytest.mark.parametrize("seed", range(12))
def test_random_program_matches_eager(seed: int) -> None:
    fn = _program(seed)
    make = lambda: [torch.randn(N, N), torch.randn(N, N)]  # noqa: E731
    example = make()
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": ReferenceBackend()})
    for _ in range(2):
        fresh = make()
        assert_close(compiled(*fresh), fn(*fresh))
