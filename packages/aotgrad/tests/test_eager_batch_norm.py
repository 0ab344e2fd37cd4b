"""Batch norm's running statistics match eager's when a channel holds an inf.

torch's decomposition took the batch mean from var_mean (Welford: NaN with an inf in the channel)
where eager divides the sum by the count (inf): the running mean became NaN, not inf.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from aotgrad_helpers import strict

import aotgrad

aten = torch.ops.aten


def _functional(x: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.batch_norm(x, rm, rv, w, None, training=True, momentum=0.25)


def _native(x: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return aten.native_batch_norm(x, w, None, rm, rv, True, 0.25, 1e-5)[0]


@pytest.mark.parametrize("requires_grad", (False, True), ids=("no_grad", "grad"))
@pytest.mark.parametrize("fn", (_functional, _native), ids=("F.batch_norm", "native_batch_norm"))
def test_running_mean_of_a_channel_with_inf(fn: Callable[..., torch.Tensor], requires_grad: bool) -> None:
    def inputs() -> list[torch.Tensor]:
        x = torch.randn(37, 6, 3, generator=torch.Generator().manual_seed(61), dtype=torch.float64)
        x[5, 1, 2], x[7, 2, 0], x[8, 2, 1] = float("inf"), float("-inf"), float("inf")
        rm = torch.randn(6, generator=torch.Generator().manual_seed(62), dtype=torch.float64)
        rv = torch.rand(6, generator=torch.Generator().manual_seed(63), dtype=torch.float64) + 0.5
        w = torch.randn(6, generator=torch.Generator().manual_seed(64), dtype=torch.float64)
        return [x.requires_grad_(requires_grad), rm, rv, w]

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    want, got = inputs(), inputs()
    torch.testing.assert_close(compiled(*got), fn(*want), equal_nan=True)
    torch.testing.assert_close(got[1], want[1], equal_nan=True, msg="running mean")  # inf, -inf, NaN, finite
    torch.testing.assert_close(got[2], want[2], equal_nan=True, msg="running var")


def test_evaluation_gradients_with_an_infinite_running_mean() -> None:
    """Evaluation-mode batch norm is differentiated by eager's formula: the weight's gradient is
    ``sum(dy * (x - mean)) * invstd``, NaN where the cotangents differ in sign on a channel whose
    running mean is infinite (the decomposed forward's gradient, ``sum(dy * x) - mean * sum(dy)``,
    gave -inf there); the input's and the bias's gradients and the output match too."""

    def fn(
        x: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor, w: torch.Tensor, b: torch.Tensor
    ) -> torch.Tensor:
        return F.batch_norm(x, rm, rv, w, b, training=False, momentum=0.25)

    def inputs() -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(71)
        x = torch.randn(1, 6, 2, 1, generator=g)
        rm = torch.randn(6, generator=g)
        rm[1], rm[4] = float("-inf"), float("inf")
        rv = torch.rand(6, generator=g) + 0.1
        w = torch.randn(6, generator=g)
        b = torch.randn(6, generator=g)
        return [x.requires_grad_(), rm, rv, w.requires_grad_(), b.requires_grad_()]

    dy = torch.tensor([0.75, -2.0]).repeat(6).reshape(1, 6, 2, 1)
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    want, got = inputs(), inputs()
    want_out, got_out = fn(*want), compiled(*got)
    torch.testing.assert_close(got_out, want_out, equal_nan=True)
    want_grads = torch.autograd.grad(want_out, [want[0], want[3], want[4]], dy)
    got_grads = torch.autograd.grad(got_out, [got[0], got[3], got[4]], dy)
    assert want_grads[1][1].isnan() and want_grads[1][4].isnan()
    for name, w, g in zip(("input", "weight", "bias"), want_grads, got_grads):
        torch.testing.assert_close(g, w, equal_nan=True, msg=lambda m, n=name: f"{n}: {m}")


def test_evaluation_with_bfloat16_statistics_computes_them_in_float32() -> None:
    # Eager's CPU kernel takes the inverse standard deviation of bfloat16 running statistics in
    # float32; rounded to bfloat16 first, outputs near 0 came out on the other side of it (fuzz
    # dc75057ed7: `where(batch_norm(x) > 0, ...)` picked the other branch).
    generator = torch.Generator().manual_seed(11)
    x, mean, var, weight, bias = (
        torch.randn(shape, generator=generator).to(torch.bfloat16) for shape in ((8, 33, 16), (33,), (33,), (33,), (33,))
    )
    var = var.abs() + 0.1

    def fn(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, mean, var, weight, bias, training=False)

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    with torch.no_grad():
        got, want = compiled(x, mean, var, weight, bias), fn(x, mean, var, weight, bias)
    mismatched = (got != want).sum().item()
    assert mismatched <= got.numel() // 1000, f"{mismatched} of {got.numel()} outputs differ from eager's"
