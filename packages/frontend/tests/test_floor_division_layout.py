"""Floor division and copysign results have eager's strides, in a graph and across a graph break.

For operands broadcast from size-1 dims in other memory orders, torch's fake kernels of these ops
give other strides than eager's (fuzz adcb72d814): a `.view(-1)` that eager accepts failed while
tracing, or, on a compiled graph's output after a graph break, raised in the user's code.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import frontend

OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "floor_divide": lambda a, b: a // b,
    "copysign": torch.copysign,
}


def _operands(requires_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    a = torch.randn(1, 2, 1, generator=g).requires_grad_(requires_grad)
    b = torch.randn(1, 2, 1, generator=g).permute(2, 0, 1)  # (1, 1, 2), size-1 dims in another order
    return a, b


@pytest.mark.parametrize("graph_break", [False, True], ids=["in_graph", "after_break"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_a_view_of_the_result_works_as_in_eager(name: str, graph_break: bool) -> None:
    op = OPS[name]

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = op(a, b)
        if graph_break:
            print(end="")
        return out.view(-1) * 2

    a, b = _operands(False)
    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    torch.testing.assert_close(compiled(a, b), fn(a, b))


def test_copysign_gradient_through_the_relaid_result() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.copysign(a, b).view(-1).square().sum()

    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    grads = []
    for run in (fn, compiled):
        a, b = _operands(True)
        run(a, b).backward()
        grads.append(a.grad)
    torch.testing.assert_close(grads[1], grads[0])
