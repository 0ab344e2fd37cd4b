"""A graph's own CPU scalars are made on the device of the tensors they meet (fuzz a48fe64ae8,
d6135d1e6b: `torch.zeros((), dtype=torch.float64) + x` with x on a GPU ran eagerly, "mixes devices").

Traced with fake CUDA tensors, so the rewrite is checked without a GPU; test_gpu.py runs it."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from frontend.backends.fallback import graph_device_types
from frontend.backends.scalar_devices import place_cpu_scalars


def _graph(body: Callable[[torch.fx.Graph, list[torch.fx.Node]], Any], inputs: list[Any], mode: Any) -> Any:
    """A graph as capture records one: torch-level factory calls kept as calls (not constants)."""
    graph = torch.fx.Graph()
    placeholders = [graph.placeholder(f"x{i}") for i in range(len(inputs))]
    graph.output(body(graph, placeholders))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    FakeTensorProp(gm, mode).propagate(*inputs)
    return gm


def _fake_cuda(*shapes: tuple[int, ...]) -> tuple[list[Any], Any]:
    mode = FakeTensorMode()
    with mode:
        return [torch.empty(shape, device="cuda") for shape in shapes], mode


def _scalars_meeting_x(graph: torch.fx.Graph, xs: list[torch.fx.Node]) -> Any:
    zero = graph.call_function(torch.zeros, ((),), {"dtype": torch.float64})
    scale = graph.call_function(torch.scalar_tensor, (-1.5,), {"dtype": torch.float64})
    return graph.call_function(operator.mul, (graph.call_function(operator.add, (zero, xs[0])), scale))


def test_a_graphs_own_cpu_scalars_move_to_its_device() -> None:
    inputs, mode = _fake_cuda((1, 1))
    gm = _graph(_scalars_meeting_x, inputs, mode)
    assert graph_device_types(gm, inputs) == {"cpu", "cuda"}
    assert place_cpu_scalars(gm, inputs)
    assert graph_device_types(gm, inputs) == {"cuda"}
    with mode:
        out = gm(*inputs)
    assert out.device.type == "cuda" and out.dtype == torch.float32  # promotion as before


def _returns_its_scalar(graph: torch.fx.Graph, xs: list[torch.fx.Node]) -> Any:
    zero = graph.call_function(torch.zeros, ((),), {"dtype": torch.float64})
    return (graph.call_function(operator.add, (zero, xs[0])), zero)


def _scalar_arithmetic_on_the_cpu(graph: torch.fx.Graph, xs: list[torch.fx.Node]) -> Any:
    both = graph.call_function(operator.add, (graph.call_function(torch.zeros, ((),)), graph.call_function(torch.ones, ((),))))
    return graph.call_function(operator.add, (both, xs[0]))


def test_scalars_returned_or_computed_on_the_cpu_stay() -> None:
    for body in (_returns_its_scalar, _scalar_arithmetic_on_the_cpu):
        inputs, mode = _fake_cuda((3,))
        gm = _graph(body, inputs, mode)
        assert not place_cpu_scalars(gm, inputs), body.__name__
        assert graph_device_types(gm, inputs) == {"cpu", "cuda"}, body.__name__


def test_a_cpu_input_is_never_moved() -> None:
    inputs, mode = _fake_cuda((3,))
    with mode:
        inputs.append(torch.empty((), device="cpu"))
    gm = _graph(lambda graph, xs: graph.call_function(operator.add, (xs[0], xs[1])), inputs, mode)
    assert not place_cpu_scalars(gm, inputs)
