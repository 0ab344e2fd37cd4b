"""Does a compiled graph give eager's result? Relative errors per dtype, float64 eager as the tie-breaker.

As in the benchmarks' accuracy check: every output tensor's error is the norm of the difference
over the norm of eager's value; over the dtype's tolerance, the compiled result still passes if it
is about as close to a float64 run of the graph as eager itself is (reduced precision legitimately
rounds differently). NaN/Inf where eager is finite, or a shape or dtype change, never passes.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

TOLERANCES: dict[torch.dtype, float] = {
    torch.float64: 1e-6,
    torch.float32: 1e-3,
    torch.float16: 2e-2,
    torch.bfloat16: 3e-2,
}
"""Norm-relative error allowed against eager, by dtype."""

FP64_MULTIPLIER = 2.0
"""A result over tolerance passes if its float64 error is at most this times eager's (plus tolerance/10)."""


@dataclass(frozen=True)
class Mismatch:
    """Why a compiled result differs from eager: which output, by how much."""

    output: int
    error: float
    tolerance: float
    detail: str = ""

    def describe(self) -> str:
        """One line for messages and the repro script's docstring."""
        text = f"output {self.output}: relative error {self.error:.3g} > tolerance {self.tolerance:.3g}"
        return text + (f" ({self.detail})" if self.detail else "")


def tensors_of(value: Any) -> list[torch.Tensor]:
    """Every tensor in a (nested) output, in order."""
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """||actual - expected|| / ||expected|| in float64 (absolute when expected is zero); inf if incomparable."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return math.inf
    a = actual.detach().to(expected.device, torch.float64)
    e = expected.detach().to(torch.float64)
    if not expected.is_floating_point() and not expected.is_complex():
        return 0.0 if torch.equal(a, e) else math.inf
    both = (torch.isnan(a) & torch.isnan(e)) | (torch.isinf(e) & (a == e))
    if bool((~torch.isfinite(a) & ~both).any()) or bool((~torch.isfinite(e) & ~both).any()):
        return math.inf
    a, e = torch.where(both, 0.0, a), torch.where(both, 0.0, e)
    difference = float(torch.linalg.vector_norm(a - e))
    scale = float(torch.linalg.vector_norm(e))
    return difference / scale if scale > 0 else difference


def to_float64(value: Any) -> Any:
    """`value` with every floating-point tensor converted to float64 (for the reference run)."""
    return pytree.tree_map(lambda x: x.detach().double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x, value)


def float64_copy(gm: torch.nn.Module) -> torch.nn.Module:
    """A copy of `gm` whose floating-point parameters and buffers are float64 (for the reference run)."""
    return copy.deepcopy(gm).double()


def compare(actual: Any, expected: Any, reference: Callable[[], Any] | None = None) -> Mismatch | None:
    """None when `actual` matches `expected` (eager), else the worst `Mismatch`.

    `reference`, when given, computes the float64 result: consulted only for an output over tolerance.
    """
    got, want = tensors_of(actual), tensors_of(expected)
    if len(got) != len(want):
        return Mismatch(-1, math.inf, 0.0, f"{len(got)} output tensors, eager has {len(want)}")
    precise: list[torch.Tensor] | None = None
    for index, (a, e) in enumerate(zip(got, want)):
        tolerance = TOLERANCES.get(e.dtype, 1e-3) if e.is_floating_point() else 0.0
        error = relative_error(a, e)
        if error <= tolerance:
            continue
        if reference is not None and math.isfinite(error):
            if precise is None:
                precise = _try_reference(reference, len(want))
            if precise is not None and precise[index].shape == e.shape:
                ref = precise[index]
                mine = relative_error(a.double(), ref.double())
                eagers = relative_error(e.double(), ref.double())
                if mine <= FP64_MULTIPLIER * eagers + tolerance / 10:
                    continue
                return Mismatch(index, error, tolerance, f"vs float64: compiled {mine:.3g}, eager {eagers:.3g}")
        return Mismatch(index, error, tolerance)
    return None


def _try_reference(reference: Callable[[], Any], count: int) -> list[torch.Tensor] | None:
    """The float64 outputs, or None when the graph cannot run in float64 (then eager alone decides)."""
    try:
        values = tensors_of(reference())
    except Exception:
        return None
    return values if len(values) == count else None
