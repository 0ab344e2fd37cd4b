"""Graphs with a custom autograd.Function or a tensor-hook node: the parts around them are compiled,
the nodes run eagerly; values and gradients (custom backward and hook included) match eager."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from aotgrad_helpers import RecordingCompiler, assert_close_grads, strict

import aotgrad
from aotgrad.tracing.opaque import is_opaque


class ScaleWithOddBackward(torch.autograd.Function):
    """Forward doubles; backward triples: differentiating the forward would give the wrong gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad * 3


class Recorded:
    """A callable recorded as one graph node, keeping the real callable in `.fn` (as capture does)."""

    def __init__(self, fn: Any, name: str) -> None:
        self.fn = fn
        self.__name__ = self.__qualname__ = name
        self.__module__ = __name__

    def __call__(self, *args: Any) -> Any:
        return self.fn(*args)


scale_apply = Recorded(ScaleWithOddBackward.apply, "scale_apply")


def register_clipping_hook(tensor: torch.Tensor) -> torch.Tensor:
    """What a graph recorder emits for `tensor.register_hook(...)`: a side-effecting call."""
    tensor.register_hook(lambda grad: grad.clamp(-0.1, 0.1))
    return tensor


torch.fx.node.has_side_effect(register_clipping_hook)


def _graph_with_opaque_nodes() -> torch.fx.GraphModule:
    """`lin(x).sin()` ─► custom Function ─► hook ─► `(cos * 2) @ w2`, with parameters in both parts."""
    root = torch.nn.Module()
    root.lin = torch.nn.Linear(6, 6)
    root.w2 = torch.nn.Parameter(torch.randn(6, 3))
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    y = graph.call_function(torch.sin, (graph.call_module("lin", (x,)),))
    z = graph.call_function(scale_apply, (y,))
    hooked = graph.call_function(register_clipping_hook, (z,))
    doubled = graph.call_function(torch.mul, (graph.call_function(torch.cos, (hooked,)), 2))
    graph.output(graph.call_function(torch.matmul, (doubled, graph.get_attr("w2"))))
    return torch.fx.GraphModule(root, graph)


def test_opaque_nodes_are_found() -> None:
    gm = _graph_with_opaque_nodes()
    found = [node.name for node in gm.graph.nodes if is_opaque(node)]
    assert len(found) == 2 and "register_clipping_hook" in found[1]


def test_parts_around_opaque_nodes_are_compiled_and_gradients_match() -> None:
    torch.manual_seed(0)
    gm = _graph_with_opaque_nodes()
    forward, backward = RecordingCompiler(), RecordingCompiler()
    x = torch.randn(4, 6, requires_grad=True)
    compiled = aotgrad.aot_graph(gm, [x], fw_compiler=forward, bw_compiler=backward, config=strict())
    fresh = torch.randn(4, 6, requires_grad=True)
    out, ref = compiled(fresh), gm(fresh)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    tensors = [fresh, *gm.parameters()]
    actual = list(torch.autograd.grad(out, tensors, seed))
    expected = list(torch.autograd.grad(ref, tensors, seed))
    assert_close_grads(actual, expected)
    # one forward and one backward graph per compiled part; the custom backward and the hook ran
    assert len(forward.graphs) == 2 and len(backward.graphs) == 2
    assert "CompiledFunction" in type(out.grad_fn).__name__


def test_graph_without_opaque_nodes_is_not_split() -> None:
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Tanh()))
    compiled = aotgrad.aot_graph(gm, [torch.randn(2, 3)], fw_compiler=aotgrad.eager_compiler, config=strict())
    assert not isinstance(compiled, torch.fx.GraphModule)


class SplitWithCustomBackward(torch.autograd.Function):
    """Returns two halves; the backward scales each half's gradient differently."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        return x[:, :3].clone(), x[:, 3:].clone()

    @staticmethod
    def backward(ctx: Any, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return torch.cat([first * 5, second * -1], dim=1)


def test_function_returning_a_tuple_between_compiled_parts() -> None:
    root = torch.nn.Module()
    root.lin = torch.nn.Linear(6, 6)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    halves = graph.call_function(Recorded(SplitWithCustomBackward.apply, "split_apply"), (graph.call_module("lin", (x,)),))
    first, second = (graph.call_function(operator.getitem, (halves, i)) for i in range(2))
    graph.output(graph.call_function(torch.mul, (graph.call_function(torch.tanh, (first,)), second)))
    gm = torch.fx.GraphModule(root, graph)
    torch.manual_seed(0)
    x_value = torch.randn(4, 6, requires_grad=True)
    compiled = aotgrad.aot_graph(gm, [x_value], fw_compiler=aotgrad.eager_compiler, config=strict())
    out, ref = compiled(x_value), gm(x_value)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    tensors = [x_value, *gm.parameters()]
    assert_close_grads(list(torch.autograd.grad(out, tensors, seed)), list(torch.autograd.grad(ref, tensors, seed)))


def test_split_of_a_graph_with_symbolic_example_values() -> None:
    """A captured graph at a dynamic size: the input's example value has a size symbol whose first
    binding is a `size()` call in the first part (no SymInt placeholder), as capture records it.
    Splitting must not make that part depend on itself ("cycle exists between partitions")."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    root = torch.nn.Module()
    root.lin = torch.nn.Linear(6, 6)
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    rows = graph.call_method("size", (x, 0))
    y = graph.call_function(torch.sin, (graph.call_module("lin", (x,)),))
    z = graph.call_function(scale_apply, (y,))
    graph.output(graph.call_method("reshape", (graph.call_function(torch.cos, (z,)), rows, 2, 3)))
    gm = torch.fx.GraphModule(root, graph)
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC])
    fake_x = fake_mode.from_tensor(torch.randn(5, 6), symbolic_context=context)
    x.meta["example_value"] = fake_x
    rows.meta["example_value"] = fake_x.size(0)
    torch.manual_seed(0)
    for n in (5, 7):
        x_value = torch.randn(n, 6, requires_grad=True)
        compiled = aotgrad.aot_graph(gm, [x_value], fw_compiler=aotgrad.eager_compiler, config=strict())
        out, ref = compiled(x_value), gm(x_value)
        torch.testing.assert_close(out, ref)
        seed = torch.randn_like(ref)
        tensors = [x_value, *gm.parameters()]
        assert_close_grads(list(torch.autograd.grad(out, tensors, seed)), list(torch.autograd.grad(ref, tensors, seed)))
    assert "example_value" in next(iter(gm.graph.nodes)).meta  # the caller's graph keeps its meta


@torch.library.custom_op("aotgrad_tests::scale_with_odd_backward", mutates_args=())
def scale_with_odd_backward(x: torch.Tensor) -> torch.Tensor:
    """A custom op whose registered backward (x 3) is not the derivative of its forward (x 2)."""
    return x * 2


@scale_with_odd_backward.register_fake
def _scale_with_odd_backward_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


scale_with_odd_backward.register_autograd(lambda ctx, grad: grad * 3)


def test_custom_op_with_registered_autograd_gets_its_gradient() -> None:
    """A `torch.library.custom_op` with `register_autograd` (transformers' MoE `grouped_mm_fallback`):
    the trace ran its forward below autograd and the gradient through it was lost (the parameters
    before it got None, the input a wrong gradient). It runs eagerly between compiled parts."""

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(6, 6)
            self.gate = torch.nn.Linear(6, 6)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scaled = torch.ops.aotgrad_tests.scale_with_odd_backward(self.lin(x))
            return scaled.sin() * self.gate(x).sigmoid()

    torch.manual_seed(0)
    model = Model()
    gm = torch.fx.symbolic_trace(model)
    assert any(is_opaque(node) for node in gm.graph.nodes)
    x = torch.randn(4, 6, requires_grad=True)
    compiled = aotgrad.aot_graph(gm, [x], fw_compiler=aotgrad.eager_compiler, config=strict())
    out, ref = compiled(x), model(x)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    tensors = [x, *model.parameters()]
    assert_close_grads(list(torch.autograd.grad(out, tensors, seed, allow_unused=True)),
                       list(torch.autograd.grad(ref, tensors, seed, allow_unused=True)))
