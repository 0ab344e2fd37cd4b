"""Decompositions of factories that work for every size eager accepts.

torch's reference decomposition of ``eye`` compares two ``arange``s of the narrowest integer dtype
that holds the size: uint16 from 256 rows or columns on, a dtype CPU ``arange`` does not implement
and Kiln's code generators do not support, so ``torch.eye(256, 1)`` failed to compile. Here the
ranges are int64, as eager's own kernel indexes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten

__all__ = ["EAGER_FACTORIES"]


def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
) -> torch.Tensor:
    """The `n` x `m` identity (`m` defaults to `n`): ones where the row index equals the column's."""
    del layout, pin_memory  # strided and unpinned: what the graphs aotgrad traces hold
    rows = torch.arange(n, dtype=torch.int64, device=device)
    cols = torch.arange(n if m is None else m, dtype=torch.int64, device=device)
    return (rows.unsqueeze(-1) == cols).to(dtype or torch.get_default_dtype())


EAGER_FACTORIES: dict[Any, Callable[..., Any]] = {
    aten.eye.default: eye,
    aten.eye.m: eye,
}
