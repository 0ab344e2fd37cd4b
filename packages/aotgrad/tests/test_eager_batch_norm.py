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
