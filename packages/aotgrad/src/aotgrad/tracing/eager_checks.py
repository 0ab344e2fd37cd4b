"""Checks eager's kernels make that the traced decompositions drop, put back above tracing.

`F.one_hot` on fake and functional tensors decomposes to ``arange(C) == indices.unsqueeze(-1)``,
without eager's check that every class lies in ``[0, num_classes)``: a class out of range gave a
row of zeros where eager raises. Traced here as a ``scatter`` of ones into zeros (the same values),
whose index the compiled kernels check at run time (eager's ``RuntimeError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

__all__ = ["EagerChecks"]


class EagerChecks(TorchFunctionMode):
    """Calls of ops whose traced decomposition skips eager's argument checks, traced as ops that
    keep them (see the module docstring); every other call goes through unchanged."""

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is F.one_hot:
            checked = _checked_one_hot(*args, **kwargs)
            if checked is not None:
                return checked
        return func(*args, **kwargs)


def _checked_one_hot(indices: Any, num_classes: int = -1) -> torch.Tensor | None:
    """`F.one_hot` as a scatter (None where eager's own path is kept: a class count read from the
    data, or an argument eager rejects anyway)."""
    if not isinstance(indices, torch.Tensor) or indices.dtype != torch.int64 or not isinstance(num_classes, int) \
            or num_classes < 0 or indices.numel() == 0:
        return None
    zeros = torch.zeros((*indices.shape, num_classes), dtype=torch.int64, device=indices.device)
    return zeros.scatter(-1, indices.unsqueeze(-1), 1)
