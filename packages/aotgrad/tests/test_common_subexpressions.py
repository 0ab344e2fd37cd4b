"""Repeated calls (same op, same arguments) are merged: autocast casts an activation once per matmul
reading it, and each copy would be stored, and rebuilt in the backward, on its own."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.fx

from aotgrad import aot_function
from aotgrad.tracing.graph_passes import merge_common_subexpressions

aten = torch.ops.aten


def _recording(graphs: list[torch.fx.GraphModule]) -> Any:
    def compiler(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    return compiler


def _casts_of_the_activation(gm: torch.fx.GraphModule) -> int:
    return sum(
        1
        for n in gm.graph.nodes
        if n.target is aten._to_copy.default and n.kwargs.get("dtype") is torch.bfloat16 and n.args[0].target is aten.mul.Tensor
    )


def _three_projections(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x * 2  # read by three matmuls: autocast casts it three times
        return sum((torch.mm(h, w[k]).float() for k in range(3)), torch.zeros(()))


@pytest.mark.parametrize("training", [False, True])
def test_autocasts_of_one_activation_are_merged(training: bool) -> None:
    torch.manual_seed(0)
    x, w = torch.randn(8, 16, requires_grad=training), torch.randn(3, 16, 16, requires_grad=training)
    graphs: list[torch.fx.GraphModule] = []
    compiled = aot_function(_three_projections, fw_compiler=_recording(graphs))
    out = compiled(x, w)
    assert _casts_of_the_activation(graphs[0]) == 1
    torch.testing.assert_close(out, _three_projections(x, w))
    if training:
        cotangent = torch.randn_like(out)
        got = torch.autograd.grad(out, (x, w), cotangent)
        want = torch.autograd.grad(_three_projections(x, w), (x, w), cotangent)
        for a, b in zip(got, want):  # bit-exact: the gradients still add up in float32, as eager's
            assert torch.equal(a, b)


def _graph(build: Any) -> torch.fx.Graph:
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(build(graph, x))
    return graph


def _calls(graph: torch.fx.Graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "call_function")


def test_values_equal_under_eq_but_not_the_same_are_kept_apart() -> None:
    def build(graph: torch.fx.Graph, x: torch.fx.Node) -> Any:
        pairs = [(0.0, -0.0), (1, 1.0), (1, True)]
        return tuple(graph.call_function(aten.mul.Tensor, (x, v)) for pair in pairs for v in pair)

    graph = _graph(build)
    assert merge_common_subexpressions(graph) == 1  # only the second 1 (of the (1, 1.0) and (1, True) pairs)
    assert _calls(graph) == 5


def test_random_ops_and_fresh_memory_are_never_merged() -> None:
    def build(graph: torch.fx.Graph, x: torch.fx.Node) -> Any:
        drawn = [graph.call_function(aten.rand_like.default, (x,)) for _ in range(2)]
        fresh = [graph.call_function(aten.empty_like.default, (x,)) for _ in range(2)]
        same = [graph.call_function(aten.sin.default, (x,)) for _ in range(2)]
        return (*drawn, *fresh, *same)

    graph = _graph(build)
    assert merge_common_subexpressions(graph) == 1  # the second sin
    assert _calls(graph) == 5


def test_data_dependent_results_keep_their_own_symbols() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        first, second = (x > 0).sum().item(), (x > 0).sum().item()
        torch._check(first >= 0)
        torch._check(second >= 0)
        return x.new_ones(first) * 2, x.nonzero(), x.nonzero() + 1

    graphs: list[torch.fx.GraphModule] = []
    x = torch.randn(5, 3)
    got = aot_function(fn, fw_compiler=_recording(graphs))(x)
    for a, b in zip(got, fn(x)):
        torch.testing.assert_close(a, b)
    targets = [n.target for n in graphs[0].graph.nodes]
    assert targets.count(aten._local_scalar_dense.default) == 2
    assert targets.count(aten.nonzero.default) == 2
