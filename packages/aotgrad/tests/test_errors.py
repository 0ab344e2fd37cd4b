"""Bad input: clear errors naming the op and the user's line; untraceable graphs fall back to eager."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from aotgrad_helpers import strict

import aotgrad


@torch.library.custom_op("aotgrad_test::opaque", mutates_args=())
def opaque(x: torch.Tensor) -> torch.Tensor:
    """A custom op with a CPU kernel and a gradient, but no fake kernel."""
    return x * 2 + 1


torch.library.register_autograd("aotgrad_test::opaque", lambda ctx, grad: grad * 2)


def _uses_opaque(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    return torch.ops.aotgrad_test.opaque(y) + 1  # the line the error must point at


class UsesOpaque(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _uses_opaque(x)


def test_op_without_meta_kernel_raises_naming_op_and_user_line() -> None:
    compiled = aotgrad.aot_function(_uses_opaque, fw_compiler=aotgrad.eager_compiler, config=strict())
    with pytest.raises(aotgrad.UnsupportedOperatorError) as info:
        compiled(torch.randn(4))
    message = str(info.value)
    assert "aotgrad_test::opaque" in message
    assert f"{__file__}:" in message and "register_fake" in message


def test_op_without_meta_kernel_in_a_graph_runs_eagerly_between_compiled_parts() -> None:
    """In a captured graph, a custom op with its own autograd kernel is an opaque node
    (tracing/opaque.py): it runs eagerly, so neither its missing fake kernel nor its gradient is a
    problem, and the rest of the graph is still compiled."""
    gm = torch.fx.symbolic_trace(UsesOpaque())
    x = torch.randn(5, requires_grad=True)
    compiled = aotgrad.aot_graph(gm, [x], fw_compiler=aotgrad.eager_compiler, config=strict())
    assert isinstance(compiled, torch.fx.GraphModule), "the graph should be split around the op"
    out = compiled(x)
    torch.testing.assert_close(out, _uses_opaque(x))
    (grad,) = torch.autograd.grad(out.sum(), [x])
    torch.testing.assert_close(grad, 2 * x.cos())


def test_data_dependent_shape_falls_back() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x[x > 0].sum()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)
    x = torch.randn(20)
    torch.testing.assert_close(compiled(x), fn(x))


def test_metadata_mutation_of_input_is_refused_clearly() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        x.t_()
        return x + 1

    with pytest.raises(aotgrad.TracingError, match="shape or strides"):
        aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())(torch.randn(2, 3))
    x = torch.randn(2, 3)
    x_eager = x.clone()
    out = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)(x)
    torch.testing.assert_close(out, fn(x_eager))
    assert x.shape == x_eager.shape


def test_mutating_an_input_that_requires_grad_falls_back_without_wrong_gradients() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x * 1
        y.mul_(3)
        return y

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)
    x = torch.randn(4, requires_grad=True)
    (grad,) = torch.autograd.grad(compiled(x).sum(), [x])
    torch.testing.assert_close(grad, torch.full((4,), 3.0))


def test_closed_over_parameter_is_never_a_silently_missing_gradient() -> None:
    # Seeded: with unlucky weights the ReLU can zero every output, and so the whole gradient.
    torch.manual_seed(0)
    linear = torch.nn.Linear(3, 3)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return linear(x).relu()

    with pytest.raises(aotgrad.TracingError, match="not an input"):
        aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())(torch.randn(2, 3))
    out = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)(torch.randn(2, 3))  # falls back
    (grad,) = torch.autograd.grad(out.sum(), [linear.weight])
    assert torch.count_nonzero(grad) > 0
    with torch.no_grad():  # no gradient wanted: the closed-over tensors are plain constants
        x = torch.randn(2, 3)
        torch.testing.assert_close(aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)(x), fn(x))


_NO_AUTOGRAD = torch.library.Library("aotgrad_test_plain", "DEF")
_NO_AUTOGRAD.define("opaque(Tensor x) -> Tensor")
_NO_AUTOGRAD.impl("opaque", lambda x: x * 2 + 1, "CPU")


class UsesPlainOpaque(torch.nn.Module):
    """An op with a CPU kernel only: no fake kernel, and no autograd kernel (so not an opaque node)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aotgrad_test_plain.opaque(x.sin()) + 1


def test_error_points_at_the_line_recorded_in_the_fx_node() -> None:
    gm = torch.fx.symbolic_trace(UsesPlainOpaque())
    for node in gm.graph.nodes:
        if node.op == "call_function" and "opaque" in str(node.target):
            node.meta["stack_trace"] = '  File "/home/user/model.py", line 42, in forward\n    y = opaque(x)\n'
    with pytest.raises(aotgrad.UnsupportedOperatorError) as info:
        aotgrad.aot_graph(gm, [torch.randn(3)], fw_compiler=aotgrad.eager_compiler, config=strict())
    assert info.value.user_location == "/home/user/model.py:42"
    assert "/home/user/model.py:42" in str(info.value)


class _StraightThrough(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x)

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        return grad


def test_custom_autograd_function_keeps_its_own_backward() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return _StraightThrough.apply(x * 3)

    with pytest.raises(aotgrad.TracingError, match="_StraightThrough"):
        aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())(torch.randn(4, requires_grad=True))
    x = torch.randn(4, requires_grad=True)
    out = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)(x)  # falls back to eager
    (grad,) = torch.autograd.grad(out.sum(), [x])
    torch.testing.assert_close(grad, torch.full((4,), 3.0))  # round's derivative would give zeros
