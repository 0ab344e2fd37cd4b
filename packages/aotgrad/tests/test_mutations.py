"""Mutated inputs written back: batch-norm running statistics over training steps, the batched
write-back (one `_foreach_copy_` per device and dtype), and no copy where a compiler wrote in place."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.fx
from aotgrad_helpers import strict
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

import aotgrad
from aotgrad.runtime.writeback import MUTATED_INPUTS_META

aten = torch.ops.aten


class ConvBNNet(torch.nn.Module):
    """Three conv + batch-norm stages and a residual: nine mutated buffers per training step."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.bn1d = torch.nn.BatchNorm1d(8, momentum=0.3)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = torch.relu(self.bn(self.conv(y)) + y)
        return self.head(self.bn1d(y.mean(dim=(2, 3))))


def _train(model: torch.nn.Module, forward: Callable[[torch.Tensor], torch.Tensor], batches: list[torch.Tensor]) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in batches:
        optimizer.zero_grad()
        forward(batch).square().mean().backward()
        optimizer.step()


def test_running_stats_match_eager_after_three_training_steps() -> None:
    torch.manual_seed(0)
    model = ConvBNNet()
    reference = copy.deepcopy(model)
    batches = [torch.randn(4, 3, 8, 8) * 2 + 1 for _ in range(3)]
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    _train(model, compiled, batches)
    _train(reference, reference, batches)
    for (name, actual), (_, expected) in zip(model.named_buffers(), reference.named_buffers()):
        torch.testing.assert_close(actual, expected, msg=lambda m, n=name: f"{n}: {m}")
    for (name, actual), (_, expected) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
    assert int(model.bn.num_batches_tracked) == 3


class _CountCopies(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = func.overloadpacket.__name__
        if name in ("copy_", "_foreach_copy_"):
            self.calls[name] = self.calls.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def test_write_back_is_one_foreach_copy_per_dtype() -> None:
    torch.manual_seed(0)
    model = ConvBNNet()
    x = torch.randn(4, 3, 8, 8)
    compiled = aotgrad.aot_graph(model, [x], fw_compiler=aotgrad.eager_compiler, config=strict())
    region = compiled.region_for([*compiled.state_tensors(), x])
    assert region is not None and len(region.graph.mutated_inputs) == 9
    means = [m.running_mean.clone() for m in (model.stem[1], model.bn, model.bn1d)]
    with _CountCopies() as counter:
        region([*compiled.state_tensors(), x])
    # float32 statistics in one call, int64 batch counters in another; no per-buffer copy_
    assert counter.calls == {"_foreach_copy_": 2}
    assert all(not torch.equal(m.running_mean, old) for m, old in zip((model.stem[1], model.bn, model.bn1d), means))
    assert int(model.bn.num_batches_tracked) == 1


def _in_place_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """A compiler that stores the new values of mutated inputs into the inputs themselves and
    returns those inputs, as `MUTATED_INPUTS_META` allows."""
    mutated = gm.meta.get(MUTATED_INPUTS_META, ())  # the backward graph mutates nothing

    def run(*inputs: Any) -> tuple[Any, ...]:
        results = list(gm(*inputs))
        for slot, index in enumerate(mutated):
            with _disable_current_modes():  # the compiler's own store, not counted as a write-back
                inputs[index].copy_(results[slot])
            results[slot] = inputs[index]
        return tuple(results)

    return run


def test_no_copy_back_when_the_compiler_wrote_in_place() -> None:
    torch.manual_seed(0)
    model = ConvBNNet()
    reference = copy.deepcopy(model)
    x = torch.randn(4, 3, 8, 8)
    compiled = aotgrad.aot_graph(model, [x], fw_compiler=_in_place_compiler, config=strict())
    region = compiled.region_for([*compiled.state_tensors(), x])
    assert region is not None
    region([*compiled.state_tensors(), x])  # the first call decides what to copy
    reference(x)
    with _CountCopies() as counter:
        out = compiled(x)
    expected = reference(x)
    assert counter.calls == {}
    torch.testing.assert_close(out, expected)
    for actual, wanted in zip(model.buffers(), reference.buffers()):
        torch.testing.assert_close(actual, wanted)


def _restriding_in_place_compiler(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """`_in_place_compiler`, returning each written input as a view with contiguous strides: the
    same elements, the strides of its dimensions of size 1 changed (as a kernel compiler's own
    layout of the input may have them)."""
    mutated = gm.meta.get(MUTATED_INPUTS_META, ())

    def run(*inputs: Any) -> tuple[Any, ...]:
        results = list(gm(*inputs))
        for slot, index in enumerate(mutated):
            target = inputs[index]
            target.copy_(results[slot])
            strides = torch.empty(target.shape).stride()
            results[slot] = target.as_strided(target.shape, strides, target.storage_offset())
        return tuple(results)

    return run


def test_an_input_written_in_place_with_other_strides_on_its_size_one_dims_is_not_copied_onto_itself() -> None:
    # fuzz 02cd5959f2: `a.view(-1).sign_()` of a stepped one-row bool input `x[::2]` (strides (2, 1),
    # the compiled graph's result (1, 1)) copied the result onto the input: an overlap error
    def update(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.view(-1).sign_()
        b.mul_(3)
        return b + 1

    g = torch.Generator().manual_seed(0)
    make = lambda: [(torch.randn(2, 7, generator=g) > 0)[::2], torch.randn(3, 7, generator=g)[::2][:1]]  # noqa: E731
    inputs = make()
    copies = [t.clone() for t in inputs]
    assert inputs[0].stride() == (14, 1) and inputs[0].shape == (1, 7)
    compiled = aotgrad.aot_function(update, fw_compiler=_restriding_in_place_compiler, config=strict())
    with torch.no_grad():
        out = compiled(*inputs)
    expected = update(*copies)
    torch.testing.assert_close(out, expected)
    for actual, wanted in zip(inputs, copies):
        torch.testing.assert_close(actual, wanted)


def test_user_input_mutations_of_several_kinds_are_written_back() -> None:
    def update(x: torch.Tensor, count: torch.Tensor, table: torch.Tensor, flags: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        count.fill_(7)  # a number broadcast into the tensor
        table[1].add_(x.sum())  # through a view of the input
        flags.logical_not_()
        return x + table.sum()

    torch.manual_seed(0)
    make = lambda: [torch.randn(5), torch.zeros(3, dtype=torch.int64), torch.randn(3, 4), torch.rand(6) > 0.5]  # noqa: E731
    inputs = make()
    copies = [t.clone() for t in inputs]
    compiled = aotgrad.aot_function(update, fw_compiler=aotgrad.eager_compiler, config=strict())
    with torch.no_grad():
        out = compiled(*inputs)
    expected = update(*copies)
    torch.testing.assert_close(out, expected)
    for actual, wanted in zip(inputs, copies):
        torch.testing.assert_close(actual, wanted)


def _residual_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a += b  # torchvision's `out += identity`
    return a.relu() * 2


def _scaled_then_updated(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    before = a * 3  # its gradient needs nothing of `a`; `a * b` below needs the old `a`
    a.mul_(b)
    return before + a.sin()


def _row_updated(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a[1].add_(b[0] * 2)  # through a view of the input
    return a.exp().sum(0)


@pytest.mark.parametrize("fn", [_residual_add, _scaled_then_updated, _row_updated])
def test_in_place_update_of_an_input_that_requires_grad_is_traced_like_eager(fn: Callable[..., torch.Tensor]) -> None:
    # The input is an activation (not a leaf), as after a graph break: eager updates it in place
    # and autograd records the update; the compiled region must do the same, not fall back.
    torch.manual_seed(0)
    weight, b = torch.randn(4, 5, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    results = []
    for run in (fn, compiled):
        a = weight * 1.5
        out = run(a, b)
        (out.square().sum() + a.sum()).backward()  # the updated input is used afterwards too
        results.append((out.detach(), a.detach(), weight.grad.clone(), b.grad.clone()))
        weight.grad = b.grad = None
    for got, want in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(got, want)


def test_in_place_update_of_a_leaf_that_requires_grad_raises_as_in_eager() -> None:
    compiled = aotgrad.aot_function(_residual_add, fw_compiler=aotgrad.eager_compiler, config=strict())
    a, b = torch.randn(3, requires_grad=True), torch.randn(3)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        _residual_add(a, b)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place operation"):
        compiled(a, b)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_write_into_an_input_sharing_memory_with_another_runs_eagerly(requires_grad: bool) -> None:
    # Two overlapping views of one activation: the graph would give `b` its own copy of the values,
    # so `b * 2` would miss the write through `a`. aotgrad refuses such a region (it runs eagerly).
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.add_(1)
        return b * 2

    torch.manual_seed(0)
    weight = torch.randn(5, requires_grad=requires_grad)
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler)
    results = []
    for run in (fn, compiled):
        base = weight * 1.5
        out = run(base[:3], base[1:4])
        if requires_grad:
            out.sum().backward()
            results.append((out.detach(), weight.grad.clone()))
            weight.grad = None
        else:
            results.append((out,))
    for got, want in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(got, want)


def test_a_write_into_a_disjoint_slice_of_a_shared_buffer_is_compiled() -> None:
    # Slices of one buffer that share no element (parameters flattened into one buffer): the write
    # shows through no other input, so the region compiles (strict: no eager fallback).
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a.add_(1)
        return b * 2

    torch.manual_seed(0)
    base = torch.randn(6)
    copy = base.clone()
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    torch.testing.assert_close(compiled(copy[:3], copy[3:]), fn(base[:3], base[3:]))
    torch.testing.assert_close(copy, base)
