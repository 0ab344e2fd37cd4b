"""The entry points: aot_graph as a backend, aot_function on pytrees, aot_module, decompositions."""

from __future__ import annotations

import functools

import torch
import torch.fx
from aotgrad_helpers import RecordingCompiler, TransformerBlock, strict

import aotgrad

aten = torch.ops.aten


def _aten_only(gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        if node.op == "call_function":
            assert isinstance(node.target, torch._ops.OpOverload) or node.target.__name__ == "getitem", node
            if isinstance(node.target, torch._ops.OpOverload):
                assert node.target.namespace == "aten" and not node.target._schema.is_mutable, node
        assert node.op in ("placeholder", "call_function", "output"), node


def test_aot_graph_bound_is_a_backend_and_hands_on_functional_aten_graphs() -> None:
    recorder = RecordingCompiler()
    backend = functools.partial(aotgrad.aot_graph, fw_compiler=recorder, config=strict())
    block = TransformerBlock(p=0.0)
    x = torch.randn(2, 4, 32, requires_grad=True)
    compiled = backend(torch.fx.symbolic_trace(block), [x])
    out = compiled(x)
    torch.testing.assert_close(out, block(x), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    assert len(recorder.graphs) == 2  # forward and backward
    for gm in recorder.graphs:
        _aten_only(gm)
    # Parameters and buffers are graph inputs, not attributes.
    forward = recorder.graphs[0]
    assert not any(n.op == "get_attr" for n in forward.graph.nodes)
    assert sum(n.op == "placeholder" for n in forward.graph.nodes) == len(list(block.parameters())) + 1


def test_aot_eager_backend_matches_eager() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.LayerNorm(6), torch.nn.SiLU())
    x = torch.randn(3, 6, requires_grad=True)
    compiled = aotgrad.aot_eager(torch.fx.symbolic_trace(model), [x])
    out, ref = compiled(x), model(x)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    got = torch.autograd.grad(out, [x, *model.parameters()], seed)
    want = torch.autograd.grad(ref, [x, *model.parameters()], seed)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_aot_function_takes_pytrees_and_kwargs() -> None:
    def fn(inputs: dict[str, torch.Tensor], scale: float = 1.0) -> dict[str, torch.Tensor]:
        return {"sum": (inputs["a"] * inputs["b"]).sum() * scale, "diff": inputs["a"] - inputs["b"]}

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    a, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    out = compiled({"a": a, "b": b}, scale=3.0)
    ref = fn({"a": a, "b": b}, scale=3.0)
    torch.testing.assert_close(out["sum"], ref["sum"])
    torch.testing.assert_close(out["diff"], ref["diff"])
    (grad_a,) = torch.autograd.grad(out["sum"], [a])
    torch.testing.assert_close(grad_a, 3.0 * b)


def test_aot_module_trains_like_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 2))
    twin = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.ReLU(), torch.nn.Linear(7, 2))
    twin.load_state_dict(model.state_dict())
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    opt, opt_twin = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    for _ in range(3):
        x = torch.randn(4, 5)
        for module, optimizer in ((compiled, opt), (twin, opt_twin)):
            optimizer.zero_grad()
            module(x).pow(2).mean().backward()
            optimizer.step()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p, q)
    assert len(list(compiled.parameters())) == len(list(model.parameters()))


def test_custom_decomposition_table_is_used() -> None:
    recorder = RecordingCompiler()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)

    x = torch.randn(4)
    table = aotgrad.default_decompositions()
    table[aten.gelu.default] = lambda t, approximate="none": t * torch.sigmoid(1.702 * t)
    aotgrad.aot_function(fn, fw_compiler=recorder, decompositions=table)(x)
    targets = {n.target for n in recorder.graphs[0].graph.nodes}
    assert aten.gelu.default not in targets and aten.sigmoid.default in targets
    recorder.graphs.clear()
    aotgrad.aot_function(fn, fw_compiler=recorder)(x)
    assert aten.gelu.default in {n.target for n in recorder.graphs[0].graph.nodes}


def test_default_decompositions_keep_random_ops_whole() -> None:
    table = aotgrad.default_decompositions()
    assert aten.bernoulli.default not in table and aten.native_batch_norm.default in table
    assert aten.addmm.default not in table  # Core ATen itself


def test_compiled_under_no_grad_then_trained() -> None:
    model = torch.nn.Linear(3, 3)
    x = torch.randn(2, 3)
    with torch.no_grad():
        compiled = aotgrad.aot_graph(torch.fx.symbolic_trace(model), [x], fw_compiler=aotgrad.eager_compiler)
    out = compiled(x)
    assert out.requires_grad
    (grad,) = torch.autograd.grad(out.sum(), [model.weight])
    torch.testing.assert_close(grad, x.sum(0).expand(3, 3))


def test_new_shapes_and_constant_inputs_get_their_own_graph() -> None:
    def fn(x: torch.Tensor, n: int) -> torch.Tensor:
        return x.sum(-1) * n

    gm = torch.fx.symbolic_trace(fn)
    compiled = aotgrad.aot_graph(gm, [torch.randn(2, 3), 2], fw_compiler=aotgrad.eager_compiler, config=strict())
    for x, n in ((torch.randn(2, 3), 2), (torch.randn(2, 3), 5), (torch.randn(4, 7), 5)):
        torch.testing.assert_close(compiled(x, n), fn(x, n))


def test_closed_over_constant_tensors_work_in_both_partitions() -> None:
    constant = torch.randn(4, 4)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x @ constant).sin().sum() + (x * constant).cos().sum()

    x = torch.randn(4, 4, requires_grad=True)
    (expected,) = torch.autograd.grad(fn(x), [x])
    for partition in (aotgrad.min_cut, aotgrad.save_all):
        compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, partition=partition, config=strict())
        out = compiled(x)
        torch.testing.assert_close(out, fn(x))
        (grad,) = torch.autograd.grad(out, [x])
        torch.testing.assert_close(grad, expected)


def test_a_table_decomposing_to_prims_still_trains() -> None:
    # A code generator's table may decompose into prims ops, which have no derivative formulas and
    # alias annotations functionalization rejects: decomposition must happen below autograd.
    from torch._decomp import get_decompositions

    table = aotgrad.default_decompositions()
    table.update(get_decompositions([aten.native_layer_norm, aten.var_mean]))

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (8,), w, b).sin()

    args = [torch.randn(3, 8, requires_grad=True), torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)]
    recorder = RecordingCompiler()
    compiled = aotgrad.aot_function(fn, fw_compiler=recorder, decompositions=table, config=strict())
    out, ref = compiled(*args), fn(*args)
    torch.testing.assert_close(out, ref)
    seed = torch.randn_like(ref)
    for got, want in zip(torch.autograd.grad(out, args, seed), torch.autograd.grad(ref, args, seed)):
        torch.testing.assert_close(got, want)
    assert not any(n.target is aten.native_layer_norm.default for n in recorder.graphs[0].graph.nodes)


def test_aot_module_takes_keyword_arguments() -> None:
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(3, 3)

        def forward(self, x: torch.Tensor, *, scale: torch.Tensor, offset: float = 0.0) -> torch.Tensor:
            return self.linear(x) * scale + offset

    model = Scaled()
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    x, scale = torch.randn(2, 3), torch.randn(3, requires_grad=True)
    out = compiled(x, scale=scale, offset=1.5)
    ref = model(x, scale=scale, offset=1.5)
    torch.testing.assert_close(out, ref)
    (grad,) = torch.autograd.grad(out.sum(), [scale])
    torch.testing.assert_close(grad, torch.autograd.grad(ref.sum(), [scale])[0])
