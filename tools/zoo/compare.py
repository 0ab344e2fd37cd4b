"""Compare a compiled model's outputs with eager's: same structure, same tensors within tolerance."""

from __future__ import annotations

import math
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


def flatten_named(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """`flatten` with each leaf's path (``logits``, ``grads.lm_head.weight``, ``hidden_states[1]``)."""
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, dict):
        return [leaf for key in value for leaf in flatten_named(value[key], f"{path}.{key}" if path else str(key))]
    if isinstance(value, (list, tuple)):
        return [leaf for i, item in enumerate(value) for leaf in flatten_named(item, f"{path}[{i}]")]
    if isinstance(value, (int, float, bool, str)) or value is None:
        return [(path, value)]
    return [(path, type(value).__name__)]


def _scaled_error(a: torch.Tensor, e: torch.Tensor) -> float:
    finite = ~torch.isnan(e)
    if not finite.any():
        return 0.0
    scale = max(1.0, float(e[finite].abs().max()))
    return float((a[finite].double() - e[finite].double()).abs().max()) / scale


def judge(actual: Any, expected: Any, reference: Any, tolerance: float,
          floor: torch.dtype | None = None) -> tuple[bool, float, str]:
    """(correct, largest scaled difference, what is wrong) of a compiled run against eager's.

    A floating-point tensor within ``tolerance * max(1, max|eager|)`` of eager's is right. One that
    is not is judged against `reference` (the same leaf of a float64 eager run, when there is one)
    as tools/fuzz/compare.py judges a program: wrong only where the compiler's distance to the
    float64 value exceeds eager's own distance by a margin (`floor`'s tolerances, bf16 under
    autocast), and the tensor as a whole is farther from it than eager (`_worse_overall`), so
    rounding that eager also suffers is not reported. Structure, shapes, dtypes,
    integers and flags must match exactly; a gradient that is None on one side must be all zeros
    on the other.
    """
    from tools.fuzz.compare import compare_tensors

    got, want = flatten_named(actual), flatten_named(expected)
    if [p for p, _ in got] != [p for p, _ in want]:
        return False, float("inf"), f"output structure differs: {[p for p, _ in got][:8]} vs {[p for p, _ in want][:8]}"
    refs = dict(flatten_named(reference)) if reference is not None else {}
    worst = 0.0
    for (path, a), (_, e) in zip(got, want, strict=True):
        if (a is None and isinstance(e, torch.Tensor)) or (e is None and isinstance(a, torch.Tensor)):
            present = a if e is None else e
            if present.count_nonzero():
                return False, float("inf"), f"{path}: None in {'eager' if e is None else 'compiled'}, nonzero in the other"
            continue
        if not isinstance(e, torch.Tensor):
            if a != e:
                return False, float("inf"), f"{path}: {a!r} vs eager {e!r}"
            continue
        if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
            what = f"{tuple(a.shape)} {a.dtype}" if isinstance(a, torch.Tensor) else type(a).__name__
            return False, float("inf"), f"{path}: {what} vs eager {tuple(e.shape)} {e.dtype}"
        if not e.is_floating_point() and not e.is_complex():
            if not torch.equal(a, e):
                return False, float("inf"), f"{path}: integers differ"
            continue
        if not torch.equal(torch.isnan(a), torch.isnan(e)):
            return False, float("inf"), f"{path}: NaNs in different places"
        error = _scaled_error(a, e)
        worst = max(worst, error)
        if error <= tolerance:
            continue
        ref = refs.get(path)
        if not isinstance(ref, torch.Tensor) or ref.shape != e.shape:
            return False, worst, f"{path}: scaled error {error:.3g} (no float64 reference)"
        problem = compare_tensors(path, e, a, ref, floor)
        if problem and _worse_overall(a, e, ref, tolerance):
            return False, worst, f"scaled error {error:.3g}; {problem}"
    return True, worst, ""


NORM_FACTOR = 2.0
"""How much farther from the float64 result than eager, over a whole tensor, a wrong tensor is."""


def _worse_overall(a: torch.Tensor, e: torch.Tensor, ref: torch.Tensor, tolerance: float) -> bool:
    """Whether the compiled tensor is farther from the float64 result than eager, over the whole tensor:
    ``|a - ref| > NORM_FACTOR * |e - ref| + tolerance * max(|ref|, sqrt(numel))`` in the 2-norm
    (the floor of one per element matches the first check's ``max(1, max|eager|)``: a gradient
    that is zero in exact arithmetic, a BatchNorm bias before another BatchNorm, is all rounding).

    The position-wise rule alone misfires on whole models: where eager's own error is large
    everywhere (bf16 training through BatchNorm over a batch of two, where both eager's and the
    compiler's gradients are mostly rounding noise), some positions are bound to have eager close
    to float64 by chance and the compiler not. A real miscompile moves the whole tensor (or a
    region of it) away from float64; rounding noise does not grow its norm much (a decomposition
    that sums in another order lands within a few times eager's error, which `tolerance`, relative
    to the tensor's norm, absorbs when both are small).
    """
    r64 = ref.double().nan_to_num(0.0, 0.0, 0.0)
    mine = (a.double().nan_to_num(0.0, 0.0, 0.0) - r64).norm()
    theirs = (e.double().nan_to_num(0.0, 0.0, 0.0) - r64).norm()
    floor = max(float(r64.norm()), math.sqrt(max(1, r64.numel())))
    return bool(mine > NORM_FACTOR * theirs + tolerance * floor)
