"""Standard deviation as eager's CPU kernels compute it: accumulated, and its square root taken, in
float64.

Eager's CPU ``std`` / ``std_mean`` run one Welford reduction in double for every floating dtype and
take the square root there, casting only the result. torch's decomposition is ``sqrt(var(x))`` in
the input's dtype: for float32 values near 1e30 the variance (1e60) overflows to inf before the
square root (eager gives 7e29). Each decomposition here is torch's, run on the input cast to float64
(results cast back) for float32, float16 and bfloat16 tensors on the CPU; on other devices eager
accumulates in float32, and torch's decomposition stays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._decomp import decomposition_table

aten = torch.ops.aten

__all__ = ["EAGER_STD", "in_float64_on_cpu"]

_WIDENED = (torch.float32, torch.float16, torch.bfloat16)


def in_float64_on_cpu(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """`decomposition` (of a reduction whose first argument is the input) run in float64 for a
    float32, float16 or bfloat16 input on the CPU, its results cast back to the input's dtype."""

    def decompose(a: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if a.device.type != "cpu" or a.dtype not in _WIDENED:
            return decomposition(a, *args, **kwargs)
        out = decomposition(a.to(torch.float64), *args, **kwargs)
        return pytree.tree_map_only(torch.Tensor, lambda t: t.to(a.dtype), out)

    return decompose


EAGER_STD: dict[Any, Callable[..., Any]] = {
    op: in_float64_on_cpu(decomposition_table[op])
    for packet in (aten.std, aten.std_mean)
    for op in (getattr(packet, name) for name in packet.overloads())
    if "out" not in op._overloadname and op in decomposition_table
}
