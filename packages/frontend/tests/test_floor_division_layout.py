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


POWERS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "rpow": lambda t: (-3) ** t,
    "pow": lambda t: torch.pow(2.5, t),
    "float_power": lambda t: torch.float_power(2, t),
}


@pytest.mark.parametrize("graph_break", [False, True], ids=["in_graph", "after_break"])
@pytest.mark.parametrize("name", sorted(POWERS))
def test_a_number_to_a_transposed_power_is_contiguous_as_in_eager(name: str, graph_break: bool) -> None:
    """Eager's ``2 ** t`` writes into a fresh contiguous tensor whatever the layout of ``t``; the fake
    kernels followed the exponent's (fuzz 9e13562ca2: ``((-3) ** (a & 3)).view(-1)`` on a transposed
    ``a`` raised after the graph break the refused view made)."""
    op = POWERS[name]

    def fn(t: torch.Tensor) -> torch.Tensor:
        out = op(t)
        if graph_break:
            print(end="")
        return out.view(-1) * 2

    g = torch.Generator().manual_seed(3)
    for t in (torch.randint(0, 4, (2, 3, 4), generator=g).transpose(1, 2), torch.rand(3, 5, generator=g).t()):
        compiled = frontend.compile(fn, options={"fallback_to_eager": False})
        torch.testing.assert_close(compiled(t), fn(t), equal_nan=True)  # (-3) ** 0.5 is nan


def test_gradient_through_a_power_of_a_transposed_exponent() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        return (2.5 ** t).view(-1).cumsum(0)

    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    grads = []
    for run in (fn, compiled):
        t = torch.rand(4, 3, generator=torch.Generator().manual_seed(9)).t().requires_grad_()
        out = run(t)
        out.backward(torch.linspace(-1, 1, out.numel()))
        grads.append(t.grad)
    torch.testing.assert_close(grads[1], grads[0])
