"""Input mutations are applied back to the real inputs; aliasing outputs keep eager's aliasing."""

from __future__ import annotations

import torch
import torch.fx
from aotgrad_helpers import RecordingCompiler, strict

import aotgrad

aten = torch.ops.aten


def _compile(fn, recorder: RecordingCompiler | None = None):
    return aotgrad.aot_function(fn, fw_compiler=recorder or aotgrad.eager_compiler, config=strict())


def _assert_functional(gm: torch.fx.GraphModule) -> None:
    for node in gm.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            assert node.target.namespace == "aten", node.format_node()
            assert not node.target._schema.is_mutable, f"in-place op left: {node.format_node()}"


def test_input_mutation_is_applied_after_forward() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return x * y

    recorder = RecordingCompiler()
    compiled = _compile(fn, recorder)
    x, y = torch.randn(5), torch.randn(5, requires_grad=True)
    x_eager = x.clone()
    out = compiled(x, y)
    ref = fn(x_eager, y)
    torch.testing.assert_close(x, x_eager)
    torch.testing.assert_close(out, ref)
    (grad,) = torch.autograd.grad(out.sum(), [y])
    torch.testing.assert_close(grad, x_eager)
    for gm in recorder.graphs:
        _assert_functional(gm)


def test_mutation_through_a_view_of_an_input() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        x[0].mul_(3)
        return x.sum()

    compiled = _compile(fn)
    x = torch.randn(3, 4)
    x_eager = x.clone()
    torch.testing.assert_close(compiled(x), fn(x_eager))
    torch.testing.assert_close(x, x_eager)


def test_returned_view_of_input_is_a_real_view() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.t(), x.view(-1)[2:5]

    compiled = _compile(fn)
    x = torch.randn(3, 4)
    t, s = compiled(x)
    torch.testing.assert_close(t, x.t())
    torch.testing.assert_close(s, x.view(-1)[2:5])
    assert t.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    x.zero_()  # writes through the input show through the returned views, as in eager
    assert torch.count_nonzero(t) == 0 and torch.count_nonzero(s) == 0


def test_returning_the_input_itself_and_a_mutated_input() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y.mul_(2)
        return x, y, y.view(2, -1)

    compiled = _compile(fn)
    x, y = torch.randn(4), torch.randn(4)
    y_before = y.clone()
    a, b, c = compiled(x, y)
    assert a is x and b is y
    torch.testing.assert_close(y, y_before * 2)
    assert c.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()


def test_outputs_aliasing_each_other_share_storage() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.sin()
        return y, y.view(-1)

    compiled = _compile(fn)
    x = torch.randn(2, 3, requires_grad=True)
    y, flat = compiled(x)
    torch.testing.assert_close(y, x.sin())
    assert y.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
    (grad,) = torch.autograd.grad((y * 2).sum() + (flat * 3).sum(), [x])
    torch.testing.assert_close(grad, 5 * x.cos())


def test_view_of_input_that_requires_grad_gets_gradient() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.transpose(0, 1), x.exp()

    compiled = _compile(fn)
    x = torch.randn(3, 2, requires_grad=True)
    t, e = compiled(x)
    seed_t, seed_e = torch.randn(2, 3), torch.randn(3, 2)
    (grad,) = torch.autograd.grad([t, e], [x], [seed_t, seed_e])
    torch.testing.assert_close(grad, seed_t.t() + seed_e * x.exp())


def test_buffer_mutation_in_a_module() -> None:
    class Counter(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.register_buffer("total", torch.zeros(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.lin(x)
            self.total.add_(y.detach().sum(0))
            return y

    model = Counter()
    compiled = aotgrad.aot_graph(
        torch.fx.symbolic_trace(model), [torch.randn(2, 4)], fw_compiler=aotgrad.eager_compiler, config=strict()
    )
    expected = torch.zeros(4)
    for _ in range(2):
        x = torch.randn(2, 4)
        out = compiled(x)
        expected += model.lin(x).detach().sum(0)
        torch.testing.assert_close(out, model.lin(x))
    torch.testing.assert_close(model.total, expected)


def test_multi_view_ops_return_real_views() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*x.unbind(0), *x.split(2, dim=1))

    compiled = _compile(fn)
    x = torch.randn(2, 4)
    outs = compiled(x)
    for got, want in zip(outs, fn(x)):
        torch.testing.assert_close(got, want)
        assert got._base is x or got.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
