"""Repeated calls (same op, same arguments) are merged: autocast casts an activation once per matmul
reading it, and each copy would be stored, and rebuilt in the backward, on its own. Outputs the
caller gets as tensors of their own stay apart: merged, an output computed under `torch.no_grad()`
took the gradient of its equal twin computed with grad (`.scratch/findings/pyfuzz_62914.py`)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.fx

from aotgrad import aot_function
from aotgrad.tracing.graph_passes import merge_common_subexpressions, output_values

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
    assert merge_common_subexpressions(graph, distinct_outputs=0) == 1  # only the second 1 (of the (1, 1.0) and (1, True) pairs)
    assert _calls(graph) == 5


def test_random_ops_and_fresh_memory_are_never_merged() -> None:
    def build(graph: torch.fx.Graph, x: torch.fx.Node) -> Any:
        drawn = [graph.call_function(aten.rand_like.default, (x,)) for _ in range(2)]
        fresh = [graph.call_function(aten.empty_like.default, (x,)) for _ in range(2)]
        same = [graph.call_function(aten.sin.default, (x,)) for _ in range(2)]
        return (*drawn, *fresh, *same)

    graph = _graph(build)
    assert merge_common_subexpressions(graph, distinct_outputs=0) == 1  # the second sin
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


def test_outputs_and_the_bases_they_view_stay_apart() -> None:
    def build(graph: torch.fx.Graph, x: torch.fx.Node) -> Any:
        twins = [graph.call_function(aten.sin.default, (x,)) for _ in range(2)]
        bases = [graph.call_function(aten.cos.default, (x,)) for _ in range(2)]
        views = [graph.call_function(aten.view.default, (base, [-1])) for base in bases]
        gradients = [graph.call_function(aten.exp.default, (x,)) for _ in range(2)]
        return (*twins, *views, *gradients)

    graph = _graph(build)
    # The first four outputs are the forward's (two sins, two views of two cosines): only the
    # gradients after them merge.
    assert merge_common_subexpressions(graph, distinct_outputs=4) == 1
    outputs = output_values(graph)
    assert _calls(graph) == 7
    assert len(set(outputs[:4])) == 4 and outputs[4] is outputs[5]


def test_an_output_merged_into_an_intermediate_passes_its_distinctness_on() -> None:
    def build(graph: torch.fx.Graph, x: torch.fx.Node) -> Any:
        inner = graph.call_function(aten.sin.default, (x,))
        used = graph.call_function(aten.mul.Tensor, (inner, 2.0))
        first = graph.call_function(aten.sin.default, (x,))  # merges into `inner`, an output now
        second = graph.call_function(aten.sin.default, (x,))  # must not merge into it as well
        return (used, first, second)

    graph = _graph(build)
    assert merge_common_subexpressions(graph, distinct_outputs=3) == 1
    assert _calls(graph) == 3


def _graded_apart(x: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
    """The finding's shape: one value computed with grad and, equal to it, under no_grad."""
    h = torch.tanh(x + w)
    kept = h * 2
    with torch.no_grad():
        dropped = h * 2
    return [dropped, kept, torch.maximum(dropped, dropped)]


def _views_apart(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    kept = (x * w).view(-1)
    with torch.no_grad():
        dropped = (x * w).view(-1)
    return dropped, kept


def _twins(x: torch.Tensor, w: torch.Tensor) -> dict[str, torch.Tensor]:
    return {"a": torch.sin(x * w), "b": torch.sin(x * w)}


@pytest.mark.parametrize("fn", [_graded_apart, _views_apart, _twins], ids=lambda fn: fn.__name__)
@pytest.mark.parametrize("training", [True, False])
def test_equal_outputs_are_eager_s_separate_tensors(fn: Any, training: bool) -> None:
    def leaves() -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(7)
        return [torch.randn(4, 5, generator=g).requires_grad_(training) for _ in range(2)]

    def flat(result: Any) -> list[torch.Tensor]:
        return list(result.values()) if isinstance(result, dict) else list(result)

    compiled = aot_function(fn, fw_compiler=_recording([]))
    (x, w), (ex, ew) = leaves(), leaves()
    with torch.set_grad_enabled(training):
        got, expected = flat(compiled(x, w)), flat(fn(ex, ew))
    assert [t.requires_grad for t in got] == [t.requires_grad for t in expected]
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
    assert len({t.untyped_storage().data_ptr() for t in got}) == len(got)  # no output shares memory
    if any(t.requires_grad for t in expected):
        g = torch.Generator().manual_seed(8)
        cotangents = [torch.randn(t.shape, generator=g) for t in expected if t.requires_grad]
        got_grads = torch.autograd.grad([t for t in got if t.requires_grad], (x, w), cotangents)
        expected_grads = torch.autograd.grad([t for t in expected if t.requires_grad], (ex, ew), cotangents)
        for a, b in zip(got_grads, expected_grads, strict=True):
            torch.testing.assert_close(a, b)
