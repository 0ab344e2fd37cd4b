"""Data-dependent ops traced with unbacked symbols: `nonzero`, `masked_select`, `item()` in forward and
backward graphs (traced once, run on inputs whose results have other sizes)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from aotgrad_helpers import RecordingCompiler, strict
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

import aotgrad


def _fresh(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _unbacked_in(gm: torch.fx.GraphModule) -> bool:
    return any(free_unbacked_symbols(n.meta.get("val")) for n in gm.graph.nodes if "val" in n.meta)


def test_inference_graph_with_data_dependent_sizes_is_traced_once() -> None:
    compiler = RecordingCompiler()

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rows = torch.nonzero(x > 0)
        return rows.float().mean(0), x[x > 0].sum(), torch.zeros((x > 1).sum().item()) + 1

    compiled = aotgrad.aot_function(fn, fw_compiler=compiler, config=strict())
    for seed in range(4):
        x = _fresh(seed, 5, 6)
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(compiler.graphs) == 1 and _unbacked_in(compiler.graphs[0])


def test_training_through_masked_select_and_boolean_masks() -> None:
    forward, backward = RecordingCompiler(), RecordingCompiler()

    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        picked = torch.masked_select(x * w, x > 0)
        return (picked.exp().sum() + (x[x < 0] ** 2).sum()) * picked.numel()

    compiled = aotgrad.aot_function(fn, fw_compiler=forward, bw_compiler=backward, config=strict())
    for seed in range(3):
        x, w = _fresh(seed, 4, 7), _fresh(seed + 10, 7)
        inputs: list[Any] = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        expected_inputs: list[Any] = [x.clone().requires_grad_(), w.clone().requires_grad_()]
        out, expected = compiled(*inputs), fn(*expected_inputs)
        torch.testing.assert_close(out, expected)
        out.backward()
        expected.backward()
        for got, want in zip(inputs, expected_inputs):
            torch.testing.assert_close(got.grad, want.grad)
    assert len(forward.graphs) == 1 and len(backward.graphs) == 1


@pytest.mark.fake_unique_int64
def test_unique_backward_of_values_selected_by_a_data_dependent_index() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        values, inverse = torch.unique((x.detach() * 2).round(), return_inverse=True)
        return (x * values[inverse]).sum() + values.numel()

    compiled = aotgrad.aot_function(fn, fw_compiler=RecordingCompiler(), config=strict())
    for seed in range(3):
        x = _fresh(seed, 12)
        a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, expected = compiled(a), fn(b)
        torch.testing.assert_close(out, expected)
        out.backward()
        expected.backward()
        torch.testing.assert_close(a.grad, b.grad)


def _checked(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    n = lengths.max().item()
    torch._check(n <= x.shape[1])
    return x * 2 + n


def _checked_in_place(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y.add_(lengths.max().item())  # the in-place op: decomposed first, then functionalized (two traces)
    n = torch.nonzero(lengths).size(0)
    torch._check(n >= 2)
    return y * n


def _checked_pinned(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    n = torch.nonzero(lengths).size(0)  # fake `lengths` memoizes its symbol, which the check pins to 2
    torch._check(n == 2)
    return x * n


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize(("fn", "good", "bad"), [(_checked, [3, 8], [3, 9]),
                                                 (_checked_in_place, [3, 8, 0, 1], [0, 8, 0, 0]),
                                                 (_checked_pinned, [3, 8], [0, 8])])
def test_torch_check_on_a_data_dependent_value_is_a_graph_node(
        fn: Any, good: list[int], bad: list[int], training: bool) -> None:
    """`torch._check` records its condition in the ShapeEnv, on the traced symbol only: a graph traced
    again (functionalization's second trace, the joint trace) has fresh symbols the condition does not
    name. As an `aten._assert_scalar` node of the forward graph it reaches every compiler."""
    forward = RecordingCompiler()
    compiled = aotgrad.aot_function(fn, fw_compiler=forward, bw_compiler=RecordingCompiler(), config=strict())
    x = torch.randn(2, 8, requires_grad=training)
    torch.testing.assert_close(compiled(x, torch.tensor(good)), fn(x, torch.tensor(good)))
    with pytest.raises(RuntimeError):
        fn(x, torch.tensor(bad))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        compiled(x, torch.tensor(bad))
    (graph,) = forward.graphs
    assert any(n.target is torch.ops.aten._assert_scalar.default for n in graph.graph.nodes)
