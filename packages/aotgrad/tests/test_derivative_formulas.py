"""Gradients through ops whose derivative formulas write in place, draw random numbers or mark
outputs non-differentiable match eager's (each once gave a silently wrong gradient)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from aotgrad_helpers import strict

import aotgrad

aten = torch.ops.aten


def _differentiable(out: Any) -> list[torch.Tensor]:
    return [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor) and o.requires_grad]


def _compare(fn: Callable[..., Any], *inputs: torch.Tensor, seed: int | None = None) -> None:
    """`fn` compiled (aotgrad, eager kernels) against eager: outputs, which outputs require grad,
    and the gradients of the inputs against a random cotangent per differentiable output."""
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    if seed is not None:
        torch.manual_seed(seed)
    expected = fn(*inputs)
    if seed is not None:
        torch.manual_seed(seed)
    got = compiled(*inputs)
    torch.testing.assert_close(got, expected)
    flags = [o.requires_grad for o in pytree.tree_leaves(got) if isinstance(o, torch.Tensor)]
    assert flags == [o.requires_grad for o in pytree.tree_leaves(expected) if isinstance(o, torch.Tensor)]
    cotangents = [torch.randn_like(o) for o in _differentiable(expected)]
    wanted = [x for x in inputs if x.requires_grad]
    expected_grads = torch.autograd.grad(_differentiable(expected), wanted, cotangents, allow_unused=True)
    got_grads = torch.autograd.grad(_differentiable(got), wanted, cotangents, allow_unused=True)
    torch.testing.assert_close(got_grads, expected_grads, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "op",
    [
        lambda x, w, b: aten.native_batch_norm(x, w, b, torch.zeros(4), torch.ones(4), True, 0.1, 1e-5),
        lambda x, w, b: aten._native_batch_norm_legit(x, w, b, True, 0.1, 1e-5),
        lambda x, w, b: aten._batch_norm_with_update(x, w, b, torch.zeros(4), torch.ones(4), 0.1, 1e-5),
    ],
    ids=["native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update"],
)
def test_batch_norm_saved_statistics_are_not_differentiable(op: Callable[..., Any]) -> None:
    # Batch norm is decomposed before autograd; its saved mean and inverse std (and reserve) came
    # out requiring grad, where eager's do not.
    torch.manual_seed(0)
    x, w, b = (torch.randn(*shape, requires_grad=True) for shape in ((3, 4, 5), (4,), (4,)))
    _compare(op, x, w, b)


def test_as_strided_copy_gradient() -> None:
    # as_strided's derivative writes the gradient into a view of a zero buffer and returns the
    # buffer: the write was cut from the backward graph (the gradient came out zero).
    torch.manual_seed(0)
    x = torch.randn(4, 5, requires_grad=True)
    _compare(lambda t: torch.as_strided_copy(t, (3, 3), (4, 1), 2), x)


def test_as_strided_scatter_gradient() -> None:
    torch.manual_seed(0)
    x, src = torch.randn(10, requires_grad=True), torch.randn(2, 2, requires_grad=True)
    _compare(lambda t, s: torch.as_strided_scatter(t, s, (2, 2), (3, 1), 1), x, src)


def test_qr_and_householder_gradients() -> None:
    # Their derivatives update slices of intermediate matrices in place.
    torch.manual_seed(0)
    a = torch.randn(5, 5, requires_grad=True)
    _compare(torch.linalg.qr, a)
    tau = torch.randn(3, requires_grad=True)
    _compare(torch.linalg.householder_product, a, tau)


def test_rrelu_training_gradient() -> None:
    # rrelu_with_noise_functional's derivative reads the noise buffer it was given, not the slopes
    # it drew: the gradient of the negative entries came out zero.
    x = torch.randn(4, 6, requires_grad=True)
    _compare(lambda t: torch.nn.functional.rrelu(t, 0.1, 0.4, training=True), x, seed=3)


# --- ops without a derivative formula, on a path a backward may never take -------------------------


# Eager's error names its in-place op, Kiln's its functional one.
_NO_DERIVATIVE = r"derivative for aten::floor_divide_? is not implemented"


def _floor_divided_in_place(
    a: torch.Tensor, w: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    t = a[1:].lerp_(w, 0.3)
    t.floor_divide_(3)
    return b.sin(), a * 2


def _inputs(seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    a, w, b = torch.randn(3, 2, generator=g), torch.randn(2, generator=g), torch.randn(2, generator=g)
    return [a, w.requires_grad_(), b.requires_grad_()]


def test_an_op_without_a_derivative_raises_only_in_a_backward_that_reaches_it() -> None:
    """fuzz fe18401325: `floor_divide_` on a view written from a tensor that requires grad; eager
    raises "derivative for aten::floor_divide is not implemented" only in a backward through it,
    the joint trace raised it while compiling (a gradient no backward asked for)."""
    compiled = aotgrad.aot_function(
        _floor_divided_in_place, fw_compiler=aotgrad.eager_compiler, config=strict()
    )
    runs = []
    for f in (_floor_divided_in_place, compiled):
        a, w, b = _inputs(60)
        outs = f(a, w, b)
        cotangent = torch.randn(2, generator=torch.Generator().manual_seed(61))
        grads = torch.autograd.grad(outs[0], [w, b], cotangent, allow_unused=True)
        runs.append([[o.requires_grad for o in (*outs, a)], *outs, a, *grads])
        with pytest.raises(RuntimeError, match=_NO_DERIVATIVE):
            torch.autograd.grad(outs[1].sum(), w)
        with pytest.raises(RuntimeError, match=_NO_DERIVATIVE):
            torch.autograd.grad(a.sum(), w)  # the input's new value: written through the view
    (want_flags, *want), (got_flags, *got) = runs
    assert got_flags == want_flags
    for got_value, want_value in zip(got, want):
        if want_value is None or got_value is None:
            assert want_value is None and got_value is None
        else:
            torch.testing.assert_close(got_value, want_value)
