"""fmin/fmax keep eager's operand on a tie of -0.0 and +0.0 (1 / result shows the sign).

ATen's CPU kernel returns the first operand for float16/float32/float64 and the second for bfloat16,
whatever the layout; a 0-d bool operand (False -> +0.0) is the fuzz finding 2e06a1094b.
"""

from __future__ import annotations

import pytest
import torch
from inductor_ir_testing import check_interpret

_VALUES = (-0.0, 0.0, float("nan"), 1.0, -2.0)


def _pairs(dtype: torch.dtype) -> list[torch.Tensor]:
    k = len(_VALUES)
    idx = torch.arange(k * k)
    x = torch.tensor(_VALUES, dtype=torch.float64)[idx % k].to(dtype)
    y = torch.tensor(_VALUES, dtype=torch.float64)[idx // k].to(dtype)
    return [x, y, torch.tensor(False)]


@pytest.mark.parametrize("dtype", (torch.float64, torch.float32, torch.float16, torch.bfloat16), ids=str)
def test_fmin_fmax_ties_keep_eagers_operand(dtype: torch.dtype) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.fmin(x, y) ** -1, torch.fmax(x, y) ** -1, torch.fmin(y, x) ** -1, torch.fmax(y, x) ** -1,
                torch.fmin(x, b) ** -1, torch.fmax(b, x) ** -1)  # fmt: skip

    check_interpret(fn, lambda: _pairs(dtype))
