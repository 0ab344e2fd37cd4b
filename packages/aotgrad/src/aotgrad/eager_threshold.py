"""`threshold` on integer tensors as eager's CPU kernel computes it.

torch's decomposition is ``where(a <= threshold, value, a)`` with the Python numbers as they are: a
float ``value`` promotes an integer ``a`` to float32 before the result is cast back, which rounds
every integer beyond 2**24 (int32 ``1566630915`` came back as ``1566630912``). Eager converts
``threshold`` and ``value`` to the tensor's dtype first (truncating toward zero, as C++ does) and
selects between integers. Floating tensors keep torch's decomposition (same values as eager).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import decomposition_table

aten = torch.ops.aten

__all__ = ["EAGER_THRESHOLD", "threshold"]

_torch_threshold = decomposition_table[aten.threshold.default]


def threshold(a: torch.Tensor, threshold: float, value: float) -> torch.Tensor:
    """``value`` where ``a <= threshold``, else ``a``; for integer ``a`` both numbers are first
    truncated to integers, and the result never leaves ``a``'s dtype."""
    if a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == torch.bool:
        return _torch_threshold(a, threshold, value)  # type: ignore[no-any-return]
    return torch.where(a <= int(threshold), int(value), a)


EAGER_THRESHOLD: dict[Any, Callable[..., Any]] = {aten.threshold.default: threshold}
