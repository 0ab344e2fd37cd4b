"""``index_fill`` with a tensor value as eager computes it: the value cast to the filled tensor's dtype.

Eager's ``x.index_fill(dim, index, value)`` takes a 0-d ``value`` tensor of any dtype and writes it
converted to ``x``'s dtype (an int64 ``torch.tensor(-2)`` into an int32 ``x``). torch's decomposition
hands the value on uncast to ``index_put``, which refuses mixed dtypes ("Index put requires the
source and destination dtypes match"), so the graph failed to compile where eager ran.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import decomposition_table

aten = torch.ops.aten

__all__ = ["EAGER_FILL"]


def _index_fill_cast(op: Any) -> Callable[..., Any]:
    decomposition = decomposition_table[op]

    def index_fill(x: torch.Tensor, dim: int, index: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return decomposition(x, dim, index, value.to(x.dtype))  # type: ignore[no-any-return]

    return index_fill


EAGER_FILL: dict[Any, Callable[..., Any]] = {
    op: _index_fill_cast(op)
    for op in (aten.index_fill.int_Tensor, aten.index_fill_.int_Tensor)
    if op in decomposition_table
}
