"""Training through aotgrad with both forward and backward graphs compiled to C++ kernels."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import inductor_ir
from codegen_cpp import CppBackend

aotgrad = pytest.importorskip("aotgrad")


def test_gradients_match_eager(backend: CppBackend) -> None:
    compiled_graphs: list[Any] = []

    def cpp_compiler(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
        compiled = inductor_ir.compile_graph(gm, example_inputs, backends={"cpu": backend})
        compiled_graphs.append(compiled)
        return compiled

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(x * w + b)
        p = torch.softmax(h * 2.0, -1)
        return (p * torch.sigmoid(x)).sum() + (h.exp() * 0.1).mean()

    inputs = [
        torch.randn(29, 53, requires_grad=True),
        torch.randn(53, requires_grad=True),
        torch.randn(53, requires_grad=True),
    ]
    eager_inputs = [t.detach().clone().requires_grad_(True) for t in inputs]
    step = aotgrad.aot_function(f, fw_compiler=cpp_compiler, bw_compiler=cpp_compiler)
    loss = step(*inputs)
    loss.backward()
    expected = f(*eager_inputs)
    expected.backward()
    torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-5)
    for got, want in zip(inputs, eager_inputs):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-5)
    assert len(compiled_graphs) == 2  # a forward and a backward graph
    assert all(graph.sources for graph in compiled_graphs)  # both ran C++ kernels
