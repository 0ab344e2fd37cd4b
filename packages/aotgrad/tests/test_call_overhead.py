"""The per-call fast path of `AotCallable` (runtime/dispatch.py) must notice every change the slow
path would: a replaced parameter, requires_grad switched, new data, a dtype change, grad mode.
Behaviour only; every check compares with eager on fresh random inputs."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

import aotgrad
from aotgrad import aot_graph, eager_compiler


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(6, 5)
        self.second = nn.Linear(5, 3)
        self.register_buffer("shift", torch.randn(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x))) + self.shift


def _compiled(module: nn.Module, x: torch.Tensor) -> Any:
    return aot_graph(module, [x], fw_compiler=eager_compiler)


def _grads(module: nn.Module) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.clone() for p in module.parameters()]


def test_repeated_calls_match_eager() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    for _ in range(3):
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled(x), module(x))


def test_replaced_parameter_is_used() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    module.first.weight = nn.Parameter(torch.randn(5, 6))
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), module(x))


def test_new_data_and_buffer_are_used() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    module.second.bias.data = torch.randn(3)
    module.shift = torch.randn(3)
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), module(x))


def test_requires_grad_switched_off_after_compiling() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6)).sum().backward()
    module.zero_grad(set_to_none=True)
    module.first.weight.requires_grad_(False)
    x = torch.randn(4, 6)
    compiled(x).pow(2).sum().backward()
    assert module.first.weight.grad is None
    compiled_grads = _grads(module)
    module.zero_grad(set_to_none=True)
    module(x).pow(2).sum().backward()
    for mine, theirs in zip(compiled_grads, _grads(module)):
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            torch.testing.assert_close(mine, theirs)


def test_dtype_change_recompiles() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    module.double()
    x = torch.randn(4, 6, dtype=torch.float64)
    result = compiled(x)
    assert result.dtype == torch.float64
    torch.testing.assert_close(result, module(x))


def test_grad_mode_alternates() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    for step in range(4):
        x = torch.randn(4, 6)
        if step % 2:
            with torch.no_grad():
                out = compiled(x)
            assert not out.requires_grad
            torch.testing.assert_close(out, module(x))
        else:
            out = compiled(x)
            assert out.requires_grad
            module.zero_grad(set_to_none=True)
            out.sum().backward()
            compiled_grads = _grads(module)
            module.zero_grad(set_to_none=True)
            module(x).sum().backward()
            for mine, theirs in zip(compiled_grads, _grads(module)):
                assert mine is not None and theirs is not None
                torch.testing.assert_close(mine, theirs)


def test_input_shape_change_recompiles() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    x = torch.randn(7, 6)
    torch.testing.assert_close(compiled(x), module(x))
    x = torch.randn(6, 4).t()  # same shape as the first inputs, other strides
    torch.testing.assert_close(compiled(x), module(x))


def test_input_requiring_grad_gets_its_gradient() -> None:
    module = TwoLayers()
    compiled = aotgrad.aot_graph(module, [torch.randn(4, 6)], fw_compiler=eager_compiler)
    compiled(torch.randn(4, 6))
    x = torch.randn(4, 6, requires_grad=True)
    compiled(x).sum().backward()
    assert x.grad is not None
    expected = x.detach().clone().requires_grad_(True)
    module(expected).sum().backward()
    torch.testing.assert_close(x.grad, expected.grad)
