"""Advanced indexing with its index tensors broadcast first, so fake tensors get eager's shape.

torch's fake (meta) kernel of ``aten.index`` leaves a 0-d index tensor out of the broadcast of the
indices: ``x.index([i, j])`` with ``i`` of shape (2,) and ``j`` 0-d has eager's shape (2, ...) but a
fake shape of (...). Autograd's formula for ``index_put``'s values is such an ``index``, so the joint
trace of ``x.index_put((i, torch.tensor(34)), v)`` failed ("IndexPutBackward0 returned an invalid
gradient at index 1 - got [] but expected shape compatible with [1]"). Expanded to their common
shape first, the same indices select the same elements, and every kernel agrees on the shape.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

aten = torch.ops.aten

__all__ = ["EAGER_INDEX", "index_with_broadcast_indices"]

_MASKS = (torch.bool, torch.uint8, torch.int8)


def index_with_broadcast_indices(x: torch.Tensor, indices: Sequence[torch.Tensor | None]) -> Any:
    """``aten.index(x, indices)`` with 0-d index tensors beside others expanded to the indices'
    broadcast shape; NotImplemented (the op as it is) where no index is such, or one is a mask."""
    tensors = [t for t in indices if t is not None]
    mixed = any(t.dim() == 0 for t in tensors) and any(t.dim() > 0 for t in tensors)
    if not mixed or any(t.dtype in _MASKS for t in tensors):
        return NotImplemented
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    return aten.index.Tensor(x, [None if t is None else t.expand(shape) for t in indices])


EAGER_INDEX: dict[Any, Callable[..., Any]] = {aten.index.Tensor: index_with_broadcast_indices}
