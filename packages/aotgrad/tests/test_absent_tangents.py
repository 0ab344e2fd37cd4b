"""Outputs the loss never reached: their tangents are structural zeros, never zeros times saved values.

Eager autograd never runs the backward of an output that got no gradient, and an input reached only
through it gets None. The compiled backward used to take zeros for such an output and multiply them by
saved values: ``0 * inf`` is NaN, added into the real gradients (`y * inf` saves ``inf``). Now a backward
in which those tangents are structural zeros is derived from the backward graph, per pattern of absent
tangents (`partition/absent_tangents.py`, `runtime/absent_tangents.py`). Every check compares with eager
on seeded random inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from aotgrad_helpers import strict
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

import aotgrad
from aotgrad.partition.absent_tangents import without_absent_tangents
from aotgrad.plans import aot_graph_from_plans, export_plans

INF = float("inf")


class Counting:
    """A compiler that records the graphs it gets and runs them as they are."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        return aotgrad.eager_compiler(gm, example_inputs)


def _leaves(seed: int, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g).requires_grad_() for shape in shapes]


def _copies(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _assert_grads_match(got: Sequence[torch.Tensor], want: Sequence[torch.Tensor]) -> None:
    for index, (a, e) in enumerate(zip(got, want, strict=True)):
        if e.grad is None:
            assert a.grad is None, f"input {index}: eager has no gradient, compiled has {a.grad}"
        else:
            assert a.grad is not None, f"input {index}: no gradient, eager has one"
            # NaN exactly where eager has NaN (a loss that reads an infinite output has some).
            torch.testing.assert_close(a.grad, e.grad, equal_nan=True, msg=f"input {index}")


def _first(y: torch.Tensor) -> torch.Tensor:
    return y * INF


def _second(a: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    dead = a * 0.5  # noqa: F841 (the loss never reaches `a`: its gradient is None)
    return y.sin()


def test_a_region_whose_only_output_gets_no_gradient_adds_no_nan() -> None:
    # The finding's repro: `second` gives `a` no gradient, so the first region's backward gets None
    # for its one output, whose saved value is inf.
    (y,) = _leaves(0, (5,))
    (y_eager,) = _copies([y])
    first = aotgrad.aot_function(_first, fw_compiler=aotgrad.eager_compiler, config=strict())
    second = aotgrad.aot_function(_second, fw_compiler=aotgrad.eager_compiler, config=strict())
    second(first(y), y).sum().backward()
    _second(_first(y_eager), y_eager).sum().backward()
    _assert_grads_match([y], [y_eager])


def _heads(x: torch.Tensor, w: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    hidden = torch.tanh(x @ w)
    return hidden.sum(-1), (hidden * v * INF).exp()  # saves inf and exp's infinite result


@pytest.mark.parametrize("pick", [0, 1])
def test_two_outputs_one_loss_matches_eager_with_none_for_inputs_it_never_reached(pick: int) -> None:
    inputs = _leaves(1, (4, 6), (6, 3), (4, 3))
    expected = _copies(inputs)
    compiled = aotgrad.aot_function(_heads, fw_compiler=aotgrad.eager_compiler, config=strict())
    compiled(*inputs)[pick].sum().backward()
    _heads(*expected)[pick].sum().backward()
    _assert_grads_match(inputs, expected)
    if pick == 0:
        assert inputs[2].grad is None  # `v` feeds only the unused output: None, as in eager


def _split_heads(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    first, second = (x * w).chunk(2, dim=0)
    return first * INF, second.tanh()


@pytest.mark.parametrize("pick", [0, 1])
def test_a_cat_of_a_zero_and_a_gradient_gets_real_zeros(pick: int) -> None:
    # chunk's backward concatenates the chunks' gradients: the absent one is given as zeros (as
    # eager's formula fills them), not as zeros times the saved inf.
    inputs = _leaves(2, (4, 3), (4, 3))
    expected = _copies(inputs)
    compiled = aotgrad.aot_function(_split_heads, fw_compiler=aotgrad.eager_compiler, config=strict())
    compiled(*inputs)[pick].sum().backward()
    _split_heads(*expected)[pick].sum().backward()
    _assert_grads_match(inputs, expected)


def test_each_pattern_compiles_once_with_the_backward_compiler() -> None:
    forward, backward = Counting(), Counting()
    compiled = aotgrad.aot_function(_heads, fw_compiler=forward, bw_compiler=backward, config=strict())
    for seed, pick in [(3, 0), (4, 0), (5, 1), (6, None), (7, 1)]:
        inputs = _leaves(seed, (4, 6), (6, 3), (4, 3))
        expected = _copies(inputs)
        outs, eager_outs = compiled(*inputs), _heads(*expected)
        if pick is None:  # every output reached: the general backward, as before
            (outs[0].sum() + outs[1].sum()).backward()
            (eager_outs[0].sum() + eager_outs[1].sum()).backward()
        else:
            outs[pick].sum().backward()
            eager_outs[pick].sum().backward()
        _assert_grads_match(inputs, expected)
    # The general backward, then one per pattern of absent tangents.
    assert len(backward.graphs) == 3
    general, *variants = backward.graphs
    for variant in variants:
        assert len(variant.graph.find_nodes(op="placeholder")) < len(general.graph.find_nodes(op="placeholder"))


def test_no_output_reached_needs_no_backward() -> None:
    # A region whose outputs all get None: every gradient is None, and nothing is compiled for it.
    backward = Counting()
    first = aotgrad.aot_function(_first, fw_compiler=aotgrad.eager_compiler, bw_compiler=backward, config=strict())
    (y,) = _leaves(8, (3,))
    (grad,) = torch.autograd.grad(first(y), y, torch.ones(3))  # the general backward
    torch.testing.assert_close(grad, torch.full((3,), INF))
    second = aotgrad.aot_function(_second, fw_compiler=aotgrad.eager_compiler, config=strict())
    second(first(y), y).sum().backward()
    torch.testing.assert_close(y.grad, y.detach().cos())
    assert len(backward.graphs) == 1


def test_derived_graph_drops_zero_terms_and_returns_none_for_zero_gradients() -> None:
    backward = Counting()
    compiled = aotgrad.aot_function(_heads, fw_compiler=aotgrad.eager_compiler, bw_compiler=backward, config=strict())
    compiled(*_leaves(9, (4, 6), (6, 3), (4, 3)))
    (gm,) = backward.graphs
    num_saved = len(gm.graph.find_nodes(op="placeholder")) - 2
    derived = without_absent_tangents(gm, num_saved, [False, True])
    assert derived.fed_tangents == (0,)
    assert derived.gm is not None
    *_, output = derived.gm.graph.nodes
    assert output.args[0][2] is None  # `v`'s gradient
    reads_inf = [n for n in derived.gm.graph.nodes if any(a == INF for a in n.args)]
    assert not reads_inf, "the zero times inf is still computed"
    assert without_absent_tangents(gm, num_saved, [True, True]).gm is None
    assert len(gm.graph.find_nodes(op="placeholder")) == num_saved + 2  # the source graph is untouched


def test_double_backward_with_an_output_the_loss_never_reached() -> None:
    inputs = _leaves(10, (4, 6), (6, 3), (4, 3))
    expected = _copies(inputs)
    compiled = aotgrad.aot_function(_heads, fw_compiler=aotgrad.eager_compiler, config=strict())
    for f, xs in ((compiled, inputs), (_heads, expected)):
        (grad,) = torch.autograd.grad(f(*xs)[0].sum(), xs[0], create_graph=True)
        (grad * grad).sum().backward()
    _assert_grads_match(inputs, expected)


def _symbolic(mode: FakeTensorMode, tensor: torch.Tensor, all_dims: bool = False) -> torch.Tensor:
    dims = [DimDynamic.DYNAMIC] + [DimDynamic.DYNAMIC if all_dims else DimDynamic.STATIC] * (tensor.dim() - 1)
    fake = mode.from_tensor(tensor, symbolic_context=StatelessSymbolicContext(dynamic_sizes=dims))
    return fake.requires_grad_(tensor.requires_grad)


def test_symbolic_sizes_give_real_zeros_of_the_zeros_size() -> None:
    # At symbolic sizes the cat's zero part is `zeros_like` of the value computed from a zero tangent.
    mode = FakeTensorMode(shape_env=ShapeEnv())
    example = _leaves(11, (6, 3), (6, 3))
    gm = torch.fx.symbolic_trace(_split_heads)
    backward = Counting()
    compiled = aotgrad.aot_graph(
        gm, [_symbolic(mode, t) for t in example], fw_compiler=aotgrad.eager_compiler, bw_compiler=backward,
        config=strict(),
    )
    for rows in (4, 6, 10):
        inputs = _leaves(rows, (rows, 3), (rows, 3))
        expected = _copies(inputs)
        compiled(*inputs)[1].sum().backward()
        _split_heads(*expected)[1].sum().backward()
        _assert_grads_match(inputs, expected)
    assert len(backward.graphs) == 2  # the general backward and one variant, for every size


def test_a_region_restored_from_a_plan_traces_its_backward_graph_again() -> None:
    gm = torch.fx.symbolic_trace(_heads)
    example = _leaves(12, (4, 6), (6, 3), (4, 3))
    first = aotgrad.aot_graph(gm, example, fw_compiler=aotgrad.eager_compiler, config=strict())
    first(*_copies(example))[0].sum().backward()
    plans = export_plans(first, lambda run: run)
    backward = Counting()
    restored = aot_graph_from_plans(
        gm, example, plans, lambda run: run, fw_compiler=aotgrad.eager_compiler, bw_compiler=backward, config=strict()
    )
    inputs = _leaves(13, (4, 6), (6, 3), (4, 3))
    expected = _copies(inputs)
    restored(*inputs)[0].sum().backward()
    _heads(*expected)[0].sum().backward()
    _assert_grads_match(inputs, expected)
    assert len(backward.graphs) == 1  # the variant, from the graph traced again


def test_a_restored_region_of_symbolic_sizes_traces_from_its_fake_example_inputs() -> None:
    mode = FakeTensorMode(shape_env=ShapeEnv())
    fakes = [_symbolic(mode, t, all_dims=True) for t in _leaves(14, (6, 3), (6, 3))]
    gm = torch.fx.symbolic_trace(_split_heads)
    first = aotgrad.aot_graph(gm, fakes, fw_compiler=aotgrad.eager_compiler, config=strict())
    first(*_leaves(15, (6, 3), (6, 3)))
    plans = export_plans(first, lambda run: run)
    backward = Counting()
    restored = aot_graph_from_plans(
        gm, fakes, plans, lambda run: run, fw_compiler=aotgrad.eager_compiler, bw_compiler=backward, config=strict()
    )
    for rows, cols in ((4, 3), (8, 5), (10, 2)):
        inputs = _leaves(rows, (rows, cols), (rows, cols))
        expected = _copies(inputs)
        restored(*inputs)[1].sum().backward()
        _split_heads(*expected)[1].sum().backward()
        _assert_grads_match(inputs, expected)
    # One variant serves every size: tracing it again specialized no size (strides are symbolic too).
    assert len(backward.graphs) == 1
    for size in fakes[0].shape:
        symbol = size.node.expr
        assert not mode.shape_env.replacements.get(symbol, symbol).is_number
