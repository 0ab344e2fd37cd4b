"""The per-call fast paths of a compiled module must never run stale code.

Every call of a compiled module goes through capture's guards, aotgrad's dispatch check, the
autograd.Function and the boxed kernel runner; each has a fast path for "same as last time". These
tests change one thing between calls (a parameter, its data, requires_grad, grad mode, an input's
values, dtype, strides or aliasing) and compare with eager on fresh random inputs, through the
inductor backend (C++ kernels with static shapes baked in: a stale kernel would give wrong results).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

import aotgrad
import codegen_cpp
import frontend
import inductor_ir
from frontend.backends.fallback import compile_or_fall_back
from frontend.backends.inductor import checked_by_aotgrad
from frontend.config import Config
from frontend.context import CompileContext


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(6, 5)
        self.second = nn.Linear(5, 3)
        self.register_buffer("shift", torch.randn(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x))) + self.shift


def _grads(module: nn.Module) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.clone() for p in module.parameters()]


def _check_training_step(module: nn.Module, compiled: Any, x: torch.Tensor) -> None:
    module.zero_grad(set_to_none=True)
    out = compiled(x)
    assert out.requires_grad
    cotangent = torch.randn_like(out)
    (out * cotangent).sum().backward()
    mine = _grads(module)
    module.zero_grad(set_to_none=True)
    expected = module(x)
    torch.testing.assert_close(out, expected)
    (expected * cotangent).sum().backward()
    for got, want in zip(mine, _grads(module)):
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            torch.testing.assert_close(got, want)


@pytest.mark.usefixtures("fresh_cache")
def test_state_changes_between_calls_are_seen() -> None:
    torch.manual_seed(0)
    module = Small()
    compiled = frontend.compile(module)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(4, 6)
            torch.testing.assert_close(compiled(x), module(x))
        module.first.weight = nn.Parameter(torch.randn(5, 6))  # a replaced parameter
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled(x), module(x))
        module.second.bias.data = torch.randn(3)  # new data, same shape
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled(x), module(x))
        module.shift.data = torch.randn(1)  # new data of another shape: the kernel must not be reused
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled(x), module(x))
        x = torch.randn(4, 6)
        compiled(x)
        x.mul_(3.0)  # an input changed in place between calls
        torch.testing.assert_close(compiled(x), module(x))


@pytest.mark.usefixtures("fresh_cache")
def test_grad_mode_and_requires_grad_changes_are_seen() -> None:
    torch.manual_seed(1)
    module = Small()
    compiled = frontend.compile(module)
    for step in range(4):
        x = torch.randn(4, 6)
        if step % 2:
            with torch.no_grad():
                out = compiled(x)
            assert not out.requires_grad
            torch.testing.assert_close(out, module(x))
        else:
            _check_training_step(module, compiled, x)
    module.first.weight.requires_grad_(False)
    _check_training_step(module, compiled, torch.randn(4, 6))
    assert module.first.weight.grad is None
    module.first.weight.requires_grad_(True)
    x = torch.randn(4, 6, requires_grad=True)  # now the input wants its gradient too
    out = compiled(x)
    (out * out).sum().backward()
    expected_x = x.detach().clone().requires_grad_(True)
    expected = module(expected_x)
    (expected * expected).sum().backward()
    torch.testing.assert_close(x.grad, expected_x.grad)


@pytest.mark.usefixtures("fresh_cache")
def test_dtype_and_strides_changes_are_seen() -> None:
    torch.manual_seed(2)
    module = Small()
    compiled = frontend.compile(module)
    with torch.no_grad():
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled(x), module(x))
        x = torch.randn(6, 4).t()  # same shape, other strides
        torch.testing.assert_close(compiled(x), module(x))
        module.double()
        x = torch.randn(4, 6, dtype=torch.float64)
        result = compiled(x)
        assert result.dtype == torch.float64
        torch.testing.assert_close(result, module(x))


@pytest.mark.usefixtures("fresh_cache")
def test_aliased_inputs_match_eager() -> None:
    def scaled_sum(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * 2 + b.sin()

    compiled = frontend.compile(scaled_sum)
    a, b = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(compiled(a, b), scaled_sum(a, b))
    torch.testing.assert_close(compiled(a, a), scaled_sum(a, a))
    b = torch.randn(8)
    torch.testing.assert_close(compiled(b, b), scaled_sum(b, b))


@pytest.mark.usefixtures("fresh_cache")
def test_second_backward_through_compiled_graph_matches_eager() -> None:
    torch.manual_seed(3)
    module = Small()
    compiled = frontend.compile(module)
    x = torch.randn(4, 6, requires_grad=True)
    second = []
    for run in (module, compiled):
        (grad,) = torch.autograd.grad(run(x).pow(2).sum(), x, create_graph=True)
        second.append(torch.autograd.grad(grad.pow(2).sum(), x)[0])
    torch.testing.assert_close(second[1], second[0])


class _BoxedCrash:
    """A boxed compiled graph that empties its inputs and then fails (a kernel launch error)."""

    boxed_call = True

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, args: list[Any]) -> Any:
        self.calls += 1
        args.clear()
        raise RuntimeError("kernel launch failed")


class _BoxedDouble:
    boxed_call = True

    def __call__(self, args: list[Any]) -> Any:
        (x,) = args
        args.clear()
        return (x * 2,)


def test_boxed_runner_falls_back_with_the_original_inputs() -> None:
    gm = torch.fx.symbolic_trace(lambda x: (x * 3,))
    context = CompileContext.for_config(Config(), "test")
    crash = _BoxedCrash()
    runner = compile_or_fall_back(lambda: crash, gm, context, "the forward graph")
    assert aotgrad.is_boxed(runner)
    x = torch.randn(5)
    args = [x]
    assert torch.equal(runner(args)[0], x * 3)
    assert not args  # a boxed runner owns its list
    y = torch.randn(5)
    assert torch.equal(runner([y])[0], y * 3)
    assert crash.calls == 1
    works = compile_or_fall_back(lambda: _BoxedDouble(), gm, context, "the forward graph")
    for _ in range(2):
        z = torch.randn(5)
        assert torch.equal(works([z])[0], z * 2)


def test_a_graph_with_symbolic_sizes_runs_boxed_and_still_checks_its_inputs() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x.sin() * y).sum(0)

    torch.manual_seed(0)
    gm = make_fx(fn, tracing_mode="symbolic")(torch.randn(5, 3), torch.randn(5, 3))
    fakes = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
    compiled = inductor_ir.compile_graph(gm, fakes, backends={"cpu": codegen_cpp.CppBackend()})
    assert compiled.program.size_sources  # sizes are symbols
    runner = checked_by_aotgrad(compiled)
    # Boxed: the wrapper owns the list, so a backward's saved values can be freed as it goes.
    assert aotgrad.is_boxed(runner)
    x, y = torch.randn(7, 3), torch.randn(7, 3)
    args = [x, y]
    got = runner(args)
    assert not args
    torch.testing.assert_close(got, fn(x, y))
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        runner([torch.randn(7, 3), torch.randn(7, 3, dtype=torch.float64)])  # checked, as before
