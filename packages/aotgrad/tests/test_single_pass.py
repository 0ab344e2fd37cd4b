"""The forward traced in one functionalized pass (`tracing/single_pass.py`) computes what the
two-pass trace computes, and matches eager: outputs, gradients, mutated inputs (BatchNorm's running
statistics), `torch.no_grad()` blocks; what one pass cannot do falls back to two passes."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch
from aotgrad_helpers import assert_close_grads, strict

import aotgrad
from aotgrad.compile import fake_inputs_for
from aotgrad.decompositions import mutation_decompositions
from aotgrad.runtime.writeback import MUTATED_INPUTS_META
from aotgrad.tracing.functional import _rewrite_outputs, _trace_in_one_pass, _trace_in_two_passes

TWO_PASSES = "tracing the forward in two passes"


class SharedBatchNorm(torch.nn.Module):
    """Conv + BatchNorm applied twice (the second call reads the statistics the first updated),
    BatchNorms with another momentum, without affine parameters, and without running statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(6)
        self.slow = torch.nn.BatchNorm2d(6, momentum=0.3)
        self.bn1d = torch.nn.BatchNorm1d(6, affine=False)
        self.stateless = torch.nn.BatchNorm1d(6, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        y = self.slow(self.bn(y) + y)
        pooled = y.mean(dim=(2, 3))
        return self.bn1d(pooled) + self.stateless(pooled)


def _mutating(x: torch.Tensor, counter: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    counter.add_(1)  # an input mutated in place
    counter[0].mul_(3)  # ...and through a view of it
    with torch.no_grad():
        scale = (x * w).sum()  # no gradient flows through this
    y = (x * w).sin() * scale + counter.sum()
    return y, y.detach().cos() * w


def _paths(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if TWO_PASSES in r.getMessage()]


def _both_traces(fn: Callable[..., Any], inputs: list[torch.Tensor], training: bool) -> list[Any]:
    """The forward traced both ways (training: undecomposed), each run on copies of `inputs`."""
    results = []
    for trace in (_trace_in_one_pass, _trace_in_two_passes):
        mode, fakes = fake_inputs_for(inputs)
        with mode, torch.enable_grad():
            gm, spec = trace(fn, fakes, mutation_decompositions(), mutation_decompositions(), training)
            graph = _rewrite_outputs(gm, spec)  # input mutations become outputs
        copies = [x.detach().clone() for x in inputs]
        torch.manual_seed(0)
        with torch.no_grad():
            outputs = graph.gm(*copies)
        results.append((graph.mutated_inputs, outputs, copies))
    return results


@pytest.mark.parametrize("training", [True, False])
def test_one_pass_graph_computes_what_two_passes_compute(training: bool) -> None:
    torch.manual_seed(0)
    model = SharedBatchNorm().train()
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    names = [*params, *buffers]

    def fn(*flat: torch.Tensor) -> Any:
        state = dict(zip(names, flat[: len(names)]))
        return torch.func.functional_call(model, state, flat[len(names) :])

    inputs = [*params.values(), *buffers.values(), torch.randn(4, 3, 8, 8) * 2 + 1]
    (one_mutated, one, one_inputs), (two_mutated, two, two_inputs) = _both_traces(fn, inputs, training)
    assert one_mutated == two_mutated == tuple(range(len(params), len(names)))  # every buffer
    assert len(one) == len(two)
    for a, b in zip(one, two):  # the new running statistics, then the output
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    for a, b, c in zip(one_inputs, two_inputs, inputs):  # functional graphs leave their inputs alone
        torch.testing.assert_close(a, c, rtol=0, atol=0)
        torch.testing.assert_close(b, c, rtol=0, atol=0)


def test_batch_norm_training_takes_one_pass_and_matches_eager(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aotgrad")
    torch.manual_seed(0)
    model = SharedBatchNorm()
    reference = copy.deepcopy(model)
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    for step in range(2):
        x = torch.randn(4, 3, 8, 8) * (step + 2) + 1
        out, expected = compiled(x), reference(x)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
        seed = torch.randn_like(expected)
        got = torch.autograd.grad(out, list(model.parameters()), seed)
        want = torch.autograd.grad(expected, list(reference.parameters()), seed)
        assert_close_grads(list(got), list(want), rtol=1e-4, atol=1e-5)
        for (name, actual), (_, wanted) in zip(model.named_buffers(), reference.named_buffers()):
            torch.testing.assert_close(actual, wanted, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
    assert int(model.slow.num_batches_tracked) == 2
    assert _paths(caplog) == []


def test_input_mutations_and_no_grad_blocks_take_one_pass_and_match_eager(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aotgrad")
    torch.manual_seed(0)
    x, w = torch.randn(3, 5, requires_grad=True), torch.randn(3, 5, requires_grad=True)
    counter = torch.randn(4)
    reference_counter = counter.clone()
    compiled = aotgrad.aot_function(_mutating, fw_compiler=aotgrad.eager_compiler, config=strict())
    out = compiled(x, counter, w)
    expected = _mutating(x, reference_counter, w)
    torch.testing.assert_close(counter, reference_counter)
    for a, e in zip(out, expected):
        torch.testing.assert_close(a, e)
    seeds = [torch.randn_like(e) for e in expected]
    got = torch.autograd.grad(out, [x, w], seeds)
    want = torch.autograd.grad(expected, [x, w], seeds)
    assert_close_grads(list(got), list(want))
    assert _paths(caplog) == []


def test_cpu_dropout_falls_back_to_two_passes_and_draws_eagers_mask(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aotgrad")

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x.transpose(0, 1) * 2, 0.3) + 1

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    x = torch.randn(8, 5, 3, requires_grad=True)
    torch.manual_seed(5)
    out = compiled(x)
    torch.manual_seed(5)
    expected = fn(x)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)
    seed = torch.randn_like(expected)
    assert_close_grads(list(torch.autograd.grad(out, [x], seed)), list(torch.autograd.grad(expected, [x], seed)))
    assert any("bernoulli" in message for message in _paths(caplog))


def test_in_place_op_on_a_closed_over_constant_falls_back_to_two_passes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aotgrad")
    mask = torch.rand(4, 4) > 0.5

    def fn(x: torch.Tensor) -> torch.Tensor:
        bias = torch.zeros_like(mask, dtype=x.dtype).masked_fill_(mask, -1.0)
        return (x + bias).exp()

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    x = torch.randn(4, 4, requires_grad=True)
    out, expected = compiled(x), fn(x)
    torch.testing.assert_close(out, expected)
    seed = torch.randn_like(expected)
    assert_close_grads(list(torch.autograd.grad(out, [x], seed)), list(torch.autograd.grad(expected, [x], seed)))
    assert any("masked_fill_" in message for message in _paths(caplog))


def test_joint_graph_takes_tangents_only_for_outputs_that_need_them() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = x @ w
        return y.relu(), (x > 0).float() * 2, y.detach() + 1  # only the first requires grad

    forward, backward = [], []
    compiled = aotgrad.aot_function(
        fn,
        fw_compiler=lambda gm, ex: forward.append(gm) or gm,
        bw_compiler=lambda gm, ex: backward.append(gm) or gm,
        config=strict(),
    )
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    out = compiled(x, w)
    assert [o.requires_grad for o in out] == [True, False, False]
    tangents = [n.name for n in backward[0].graph.nodes if n.op == "placeholder" and n.name.startswith("tangents")]
    assert len(tangents) == 1, tangents
    seed = torch.randn(3, 5)
    expected = fn(x, w)
    assert_close_grads(list(torch.autograd.grad(out[0], [x, w], seed)), list(torch.autograd.grad(expected[0], [x, w], seed)))


@pytest.mark.parametrize("train_mode", [False, True])
def test_batch_norm_is_decomposed_even_when_the_callers_table_is_empty(train_mode: bool) -> None:
    torch.manual_seed(0)
    model = SharedBatchNorm().train(train_mode)
    reference = copy.deepcopy(model)
    forward: list[torch.fx.GraphModule] = []
    compiled = aotgrad.aot_module(
        model, fw_compiler=lambda gm, ex: forward.append(gm) or gm, decompositions={}, config=strict()
    )
    x = torch.randn(4, 3, 8, 8) * 2 + 1
    with torch.no_grad():
        out, expected = compiled(x), reference(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    for (name, actual), (_, wanted) in zip(model.named_buffers(), reference.named_buffers()):
        torch.testing.assert_close(actual, wanted, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
    ops = {str(node.target) for node in forward[0].graph.nodes if node.op == "call_function"}
    assert not any("batch_norm" in op for op in ops), ops


@pytest.mark.gpu
def test_cuda_batch_norm_and_dropout_take_one_pass(caplog: pytest.LogCaptureFixture) -> None:
    # On CUDA batch norm would reach cudnn_batch_norm and dropout native_dropout: both one pass.
    caplog.set_level(logging.DEBUG, logger="aotgrad")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU6(inplace=True),
        torch.nn.Flatten(), torch.nn.Dropout(0.2), torch.nn.Linear(8 * 16 * 16, 4),
    ).cuda()  # fmt: skip
    reference = copy.deepcopy(model)
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, config=strict())
    x = torch.randn(4, 3, 16, 16, device="cuda") * 2 + 1
    torch.manual_seed(3)
    out = compiled(x)
    torch.manual_seed(3)
    expected = reference(x)
    torch.testing.assert_close(out, expected, rtol=1e-2, atol=1e-2)  # cuDNN may use TF32
    for (name, actual), (_, wanted) in zip(model.named_buffers(), reference.named_buffers()):
        torch.testing.assert_close(actual, wanted, rtol=1e-2, atol=1e-3, msg=lambda m, n=name: f"{n}: {m}")
    assert _paths(caplog) == []


@pytest.mark.parametrize(
    ("input_dtype", "stats_dtype"),
    [(torch.bfloat16, torch.float32), (torch.float16, torch.float16), (torch.float64, torch.float64)],
)
def test_batch_norm_statistics_in_any_dtype_match_eager(
    input_dtype: torch.dtype, stats_dtype: torch.dtype, caplog: pytest.LogCaptureFixture
) -> None:
    # Batch norm computes half inputs' statistics in float32: the new statistics must still come
    # out in their own dtype (half statistics too), as eager's in-place update leaves them.
    caplog.set_level(logging.DEBUG, logger="aotgrad")

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, mean: torch.Tensor, var: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.batch_norm(x, mean, var, w, b, training=True, momentum=0.25) * 2

    torch.manual_seed(0)
    x = (torch.randn(8, 4, 5) * 3 + 1).to(input_dtype).requires_grad_()
    w, b = torch.randn(4, dtype=stats_dtype, requires_grad=True), torch.randn(4, dtype=stats_dtype, requires_grad=True)
    mean, var = torch.randn(4, dtype=stats_dtype), (torch.rand(4) + 0.5).to(stats_dtype)
    reference = [t.detach().clone().requires_grad_(t.requires_grad) for t in (x, w, b, mean, var)]
    forward: list[torch.fx.GraphModule] = []
    compiled = aotgrad.aot_function(
        fn, fw_compiler=lambda gm, ex: forward.append(gm) or gm, bw_compiler=aotgrad.eager_compiler, config=strict()
    )
    out, expected = compiled(x, w, b, mean, var), fn(*reference)
    # The new statistics leave the graph in their own dtype, as a compiler storing them into the
    # inputs' memory expects.
    mutated = forward[0].meta[MUTATED_INPUTS_META]
    new_values = list(forward[0].graph.output_node().args[0])[: len(mutated)]
    assert mutated == (3, 4) and [v.meta["val"].dtype for v in new_values] == [stats_dtype] * 2
    tolerance = {"rtol": 2e-2, "atol": 2e-2} if input_dtype in (torch.float16, torch.bfloat16) else {}
    torch.testing.assert_close(out, expected, **tolerance)
    torch.testing.assert_close(mean, reference[3], **tolerance)
    torch.testing.assert_close(var, reference[4], **tolerance)
    assert mean.dtype == var.dtype == stats_dtype
    seed = torch.randn_like(expected)
    got = torch.autograd.grad(out, [x, w, b], seed)
    want = torch.autograd.grad(expected, reference[:3], seed)
    assert_close_grads(list(got), list(want), **({"rtol": 5e-2, "atol": 5e-2} if tolerance else {}))
    assert _paths(caplog) == []
