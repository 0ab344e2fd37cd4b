"""Work aotgrad leaves out to compile faster, without changing what it computes: graph modules
whose Python code nobody reads are never turned into code, and the forward is traced once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.fx
from aotgrad_helpers import assert_close_grads, strict

import aotgrad


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.head = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3)))


def _interpreting_compiler(graphs: list[torch.fx.GraphModule]) -> Callable[..., Any]:
    """A compiler that only reads the graph (as a code generator does) and runs it with torch.fx."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append(gm)
        return lambda *args: torch.fx.Interpreter(gm).run(*args)

    return compile_graph


def test_graphs_a_compiler_only_reads_are_never_turned_into_python_code(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = _Net()
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(2, 3, 6, 6)
    generated: list[int] = []
    python_code = torch.fx.Graph.python_code

    def counting(self: torch.fx.Graph, *args: Any, **kwargs: Any) -> Any:
        generated.append(len(self.nodes))
        return python_code(self, *args, **kwargs)

    monkeypatch.setattr(torch.fx.Graph, "python_code", counting)
    graphs: list[torch.fx.GraphModule] = []
    compiler = _interpreting_compiler(graphs)
    compiled = aotgrad.aot_graph(gm, [x], fw_compiler=compiler, bw_compiler=compiler, config=strict())
    assert len(graphs) == 2  # forward and backward
    assert generated == [], "aotgrad generated Python code for graphs nobody runs"
    # The graphs still run, and compute what eager does.
    out, expected = compiled(x), model(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    seed = torch.randn_like(expected)
    params = list(model.parameters())
    assert_close_grads(
        list(torch.autograd.grad(out, params, seed)), list(torch.autograd.grad(expected, params, seed)), rtol=1e-4, atol=1e-5
    )
    # A graph whose code is read gets it then.
    assert "def forward" in graphs[0].code


def test_graph_modules_given_to_a_compiler_run_when_called() -> None:
    torch.manual_seed(0)
    model = _Net()
    reference = _Net()
    reference.load_state_dict(model.state_dict())
    compiled = aotgrad.aot_module(model, fw_compiler=lambda gm, ex: gm, bw_compiler=lambda gm, ex: gm, config=strict())
    x = torch.randn(2, 3, 6, 6)
    out, expected = compiled(x), reference(x)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    seed = torch.randn_like(expected)
    assert_close_grads(
        list(torch.autograd.grad(out, list(model.parameters()), seed)),
        list(torch.autograd.grad(expected, list(reference.parameters()), seed)),
        rtol=1e-4,
        atol=1e-5,
    )
    torch.testing.assert_close(model.bn.running_mean, reference.bn.running_mean)


def test_a_training_forward_is_traced_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aotgrad")
    calls: list[int] = []
    weight = torch.randn(5, 4)

    def forward(x: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        counter.add_(1)
        y = (x @ weight).relu_()
        with torch.no_grad():
            scale = y.abs().amax()
        return y * scale + counter

    compiled = aotgrad.aot_function(forward, fw_compiler=aotgrad.eager_compiler, config=strict())
    x, counter = torch.randn(3, 5, requires_grad=True), torch.zeros(4)
    out = compiled(x, counter)
    assert len(calls) == 1, "the user's forward ran more than once while compiling"
    assert not [r for r in caplog.records if "two passes" in r.getMessage()]
    reference_counter = torch.zeros(4)
    expected = forward(x, reference_counter)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(counter, reference_counter)
    seed = torch.randn_like(expected)
    assert_close_grads(list(torch.autograd.grad(out, [x], seed)), list(torch.autograd.grad(expected, [x], seed)))


def test_a_tensor_passed_twice_gets_each_uses_gradient_once() -> None:
    # The joint trace reuses its fake inputs as autograd leaves (no detach per input): a tensor
    # passed in two places must still be two leaves, or each would get the sum of both gradients.
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a * b.sin()).sum() + a.pow(2).sum()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    x = torch.randn(5, requires_grad=True)
    (got,) = torch.autograd.grad(compiled(x, x), [x])
    (want,) = torch.autograd.grad(fn(x, x), [x])
    torch.testing.assert_close(got, want)
