"""The per-call fast path of `AotCallable` (runtime/dispatch.py) must notice every change the slow
path would: a replaced parameter, requires_grad switched, new data, a dtype change, grad mode.
Every check compares with eager on fresh random inputs. The graphs are compiled by `StrictCompiler`,
which, like a real code generator, is only valid for the exact input metadata it was compiled
for: it raises when run on anything else, so a stale region reused by the fast path fails."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
import torch
from torch import nn

import aotgrad
from aotgrad import aot_graph, eager_compiler
from aotgrad.runtime import dispatch


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(6, 5)
        self.second = nn.Linear(5, 3)
        self.register_buffer("shift", torch.randn(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x))) + self.shift


def _metadata(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), tuple(value.stride()), value.dtype, value.device)
    return None  # numbers are baked into the graph: a stale one shows in the values


class StrictCompiler:
    """Compiles a graph for exactly its example inputs' shapes, strides, dtypes and devices."""

    def __init__(self) -> None:
        self.compiled = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        self.compiled += 1
        expected = [_metadata(x) for x in example_inputs]
        graph = eager_compiler(gm, example_inputs)

        def run(args: list[Any]) -> Any:
            got = [_metadata(x) for x in args]
            if got != expected:
                raise AssertionError(f"stale compiled graph: compiled for {expected}, called with {got}")
            return graph(args)

        return aotgrad.mark_boxed(run)


def _compiled(module: nn.Module, x: torch.Tensor, compiler: StrictCompiler | None = None) -> Any:
    return aot_graph(module, [x], fw_compiler=compiler or StrictCompiler())


def _grads(module: nn.Module) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.clone() for p in module.parameters()]


def test_repeated_calls_match_eager() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    for _ in range(3):
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled(x), module(x))


def test_replaced_parameter_is_used() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    module.first.weight = nn.Parameter(torch.randn(5, 6))
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), module(x))


def test_new_data_and_buffer_are_used() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    module.second.bias.data = torch.randn(3)
    module.shift = torch.randn(3)
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), module(x))


def test_requires_grad_switched_off_after_compiling() -> None:
    module = TwoLayers()
    compiler = StrictCompiler()
    compiled = _compiled(module, torch.randn(4, 6), compiler)
    compiled(torch.randn(4, 6)).sum().backward()
    module.zero_grad(set_to_none=True)
    before = compiler.compiled
    module.first.weight.requires_grad_(False)
    x = torch.randn(4, 6)
    compiled(x).pow(2).sum().backward()
    assert compiler.compiled > before  # a region without that gradient, not the stale one
    assert module.first.weight.grad is None
    compiled_grads = _grads(module)
    module.zero_grad(set_to_none=True)
    module(x).pow(2).sum().backward()
    for mine, theirs in zip(compiled_grads, _grads(module)):
        assert (mine is None) == (theirs is None)
        if mine is not None and theirs is not None:
            torch.testing.assert_close(mine, theirs)


def test_dtype_change_recompiles() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    module.double()
    x = torch.randn(4, 6, dtype=torch.float64)
    result = compiled(x)
    assert result.dtype == torch.float64
    torch.testing.assert_close(result, module(x))


def test_grad_mode_alternates() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    for step in range(4):
        x = torch.randn(4, 6)
        if step % 2:
            with torch.no_grad():
                out = compiled(x)
            assert not out.requires_grad
            torch.testing.assert_close(out, module(x))
        else:
            out = compiled(x)
            assert out.requires_grad
            module.zero_grad(set_to_none=True)
            out.sum().backward()
            compiled_grads = _grads(module)
            module.zero_grad(set_to_none=True)
            module(x).sum().backward()
            for mine, theirs in zip(compiled_grads, _grads(module)):
                assert mine is not None and theirs is not None
                torch.testing.assert_close(mine, theirs)


def test_input_shape_change_recompiles() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    x = torch.randn(7, 6)
    torch.testing.assert_close(compiled(x), module(x))
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), module(x))
    x = torch.randn(6, 4).t()  # same shape as the last inputs, other strides
    torch.testing.assert_close(compiled(x), module(x))


def test_input_requiring_grad_gets_its_gradient() -> None:
    module = TwoLayers()
    compiled = aotgrad.aot_graph(module, [torch.randn(4, 6)], fw_compiler=StrictCompiler())
    compiled(torch.randn(4, 6))
    x = torch.randn(4, 6, requires_grad=True)
    compiled(x).sum().backward()
    assert x.grad is not None
    expected = x.detach().clone().requires_grad_(True)
    module(expected).sum().backward()
    torch.testing.assert_close(x.grad, expected.grad)


def test_parameter_data_of_another_shape_recompiles() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    module.shift.data = torch.randn(1)  # same tensor object, other shape: broadcast in eager
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), module(x))


def test_non_tensor_input_value_is_checked() -> None:
    def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
        return x * factor

    gm = torch.fx.symbolic_trace(scale)
    compiled = aot_graph(gm, [torch.randn(3), 2.0], fw_compiler=StrictCompiler())
    for factor in (2.0, 3.0, 2.0):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x, factor), x * factor)


def test_outputs_that_need_no_gradient_and_their_gradients() -> None:
    def split(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = x.sin()
        return y, y.argmax(), y.detach() * 2

    compiled = aot_graph(torch.fx.symbolic_trace(split), [torch.randn(5)], fw_compiler=StrictCompiler())
    for _ in range(2):
        x = torch.randn(5, requires_grad=True)
        y, index, detached = compiled(x)
        assert y.requires_grad and not index.requires_grad and not detached.requires_grad
        assert int(index) == int(x.detach().sin().argmax())
        torch.testing.assert_close(detached, x.detach().sin() * 2)
        cotangent = torch.randn(5)
        (y * cotangent).sum().backward()
        torch.testing.assert_close(x.grad, x.detach().cos() * cotangent)


def test_input_device_change_recompiles() -> None:
    def double_sin(x: torch.Tensor) -> torch.Tensor:
        return x.sin() * 2

    compiled = aot_graph(torch.fx.symbolic_trace(double_sin), [torch.randn(4, 6)], fw_compiler=StrictCompiler())
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), double_sin(x))
    result = compiled(torch.randn(4, 6, device="meta"))  # same shape, strides and dtype; another device
    assert result.device.type == "meta" and result.shape == (4, 6)
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), double_sin(x))


def test_buffer_write_back_in_training_records_no_autograd_history() -> None:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
    reference = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4))
    reference.load_state_dict(module.state_dict())
    compiled = _compiled(module, torch.randn(8, 6))
    for _ in range(2):
        x = torch.randn(8, 6)
        compiled(x).pow(2).sum().backward()
        reference(x).pow(2).sum().backward()
    norm = module[1]
    for name in ("running_mean", "running_var"):
        buffer = getattr(norm, name)
        assert buffer.grad_fn is None and not buffer.requires_grad
        torch.testing.assert_close(buffer, getattr(reference[1], name))
    assert int(norm.num_batches_tracked) == int(reference[1].num_batches_tracked)
    # Through batch norm the weight's gradient nearly cancels: held with an absolute floor.
    torch.testing.assert_close(module[0].weight.grad, reference[0].weight.grad, rtol=1e-4, atol=1e-4)


def test_alternating_shapes_stay_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    made: list[int] = []
    original = dispatch._compile_matcher

    def counting(*args: Any) -> Any:
        made.append(1)
        return original(*args)

    monkeypatch.setattr(dispatch, "_compile_matcher", counting)
    for step in range(6):
        x = torch.randn(4 if step % 2 else 3, 6)
        torch.testing.assert_close(compiled(x), module(x))
    assert len(made) == 2  # one check per shape, each reused afterwards


def test_replaced_parameter_is_not_kept_alive() -> None:
    module = TwoLayers()
    compiled = _compiled(module, torch.randn(4, 6))
    compiled(torch.randn(4, 6))
    old = weakref.ref(module.first.weight)
    module.first.weight = nn.Parameter(torch.randn(5, 6))
    x = torch.randn(4, 6)
    torch.testing.assert_close(compiled(x), module(x))
    gc.collect()
    assert old() is None
