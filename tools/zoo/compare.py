"""Compare a compiled model's outputs with eager's: same structure, same tensors within tolerance."""

from __future__ import annotations

from typing import Any

import torch


def flatten(value: Any) -> list[Any]:
    """The leaves of a model output: tensors and plain values, in order (ModelOutput is a dict)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [leaf for key in value for leaf in flatten(value[key])]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flatten(item)]
    if isinstance(value, (int, float, bool, str)) or value is None:
        return [value]
    return [type(value).__name__]  # a cache object or the like: compared by type only


def compare_outputs(actual: Any, expected: Any, tolerance: float) -> tuple[bool, float]:
    """Whether `actual` matches `expected` and the largest scaled difference between tensors.

    Tensors match when ``|a - e| <= tolerance * max(1, max|e|)`` everywhere (NaNs in the same places),
    with the same shape and dtype.
    """
    got, want = flatten(actual), flatten(expected)
    if len(got) != len(want):
        return False, float("inf")
    worst = 0.0
    for a, e in zip(got, want, strict=True):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
                return False, float("inf")
            if not e.is_floating_point() and not e.is_complex():
                if not torch.equal(a, e):
                    return False, float("inf")
                continue
            if not torch.equal(torch.isnan(a), torch.isnan(e)):
                return False, float("inf")
            finite = ~torch.isnan(e)
            if finite.any():
                scale = max(1.0, float(e[finite].abs().max()))
                error = float((a[finite] - e[finite]).abs().max()) / scale
                worst = max(worst, error)
        elif a != e:
            return False, float("inf")
    return worst <= tolerance, worst
