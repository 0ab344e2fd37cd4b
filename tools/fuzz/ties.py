"""Ties up to rounding: values a compiler may order either way.

Two float values that differ only by a few units in the last place are often equal in exact
arithmetic (two softmax columns with the same inputs, summed in different orders): eager's rounding
makes one the smaller, a compiler's reordered sums may make it the other, and an index chosen between
them (argmin, sort, max pooling) then differs although both are right. The grammar does not generate
an index that such a near-tie decides.
"""

from __future__ import annotations

import torch

__all__ = ["ROUNDING", "near", "sorted_neighbours_tie"]

ROUNDING = {
    torch.float16: 4e-3,
    torch.bfloat16: 3e-2,
    torch.float32: 4e-6,
    torch.float64: 1e-13,
}
"""dtype -> relative distance within which two values count as tied (some tens of units in the last place)."""


def near(xt: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Elementwise: `xt` equals `value` (broadcast) up to `xt`'s rounding; exactly, for other dtypes."""
    if not xt.is_floating_point():
        return xt == value
    rtol = ROUNDING.get(xt.dtype, 0.0)
    x, v = xt.double(), value.double()
    return (x == v) | ((x - v).abs() <= rtol * v.abs())


def sorted_neighbours_tie(xt: torch.Tensor, d: int) -> bool:
    """Whether two elements of some row along `d` are equal up to rounding (`xt` floating or integral)."""
    s = xt.sort(d).values
    n = s.shape[d]
    return n > 1 and bool(near(s.narrow(d, 1, n - 1), s.narrow(d, 0, n - 1)).any())
