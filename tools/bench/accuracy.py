"""Deciding whether a compiled result is right: relative errors against eager, tolerances, verdicts.

A result is a flat, named list of tensors (outputs, gradients, updated buffers). The error of
one tensor is the norm of the difference over the norm of the expected value; a result's error is
the largest over its tensors (a tensor whose values are all far below the tolerance, mathematically
zero and numerically noise, is measured against a small floor instead of its own norm). Shape or dtype changes, missing tensors and NaN/Inf where eager has
finite values are infinitely wrong. When the error is over the tolerance, a compiled result may
still pass if it is as close to a float64 reference as eager itself is (reduced-precision models
legitimately differ from eager by rounding): `verdict` takes that second opinion when it is given.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch

# Norm-relative error allowed against eager, by the dtype of the expected tensor.
TOLERANCES: dict[torch.dtype, float] = {
    torch.float64: 1e-6,
    torch.float32: 1e-3,
    torch.float16: 2e-2,
    torch.bfloat16: 3e-2,
}
AUTOCAST_TOLERANCE = 3e-2  # float32 outputs of a model run under bf16/fp16 autocast
# The float64 second opinion: compiled error <= FP64_MULTIPLIER * eager error + tolerance / 10.
FP64_MULTIPLIER = 2.0
# Float64 reruns with rounding-sized noise on inputs and parameters that measure the reference's own
# sensitivity (see verdict), and the relative size of that noise: 16 float32 rounding steps (one step,
# 2**-24, left the ReLU mask that decided resnet_tiny's check unflipped in 3 tries).
PERTURBED_RUNS = 3
PERTURBATION = 2.0**-20
# Root-mean-square values below tolerance * FLOOR_FRACTION count as zero-valued noise (see relative_error).
FLOOR_FRACTION = 1e-2

Result = dict[str, torch.Tensor]


def flatten_tensors(value: Any, prefix: str = "out") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in a nest of tuples, lists, dicts and dataclass-like outputs, with a path name.

    >>> [name for name, _ in flatten_tensors((torch.ones(1), {"a": torch.ones(1)}))]
    ['out.0', 'out.1.a']
    """
    if isinstance(value, torch.Tensor):
        yield prefix, value
    elif isinstance(value, Mapping):
        for key in value:
            yield from flatten_tensors(value[key], f"{prefix}.{key}")
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            yield from flatten_tensors(item, f"{prefix}.{index}")
    elif hasattr(value, "to_tuple"):  # transformers' ModelOutput
        yield from flatten_tensors(value.to_tuple(), prefix)


def relative_error(actual: torch.Tensor, expected: torch.Tensor, floor_rms: float = 0.0) -> float:
    """||actual - expected|| / max(||expected||, floor) in float64; inf for a shape/dtype/device change or new NaN/Inf.

    `floor_rms` is the smallest root-mean-square value the comparison treats as signal: a tensor
    that is mathematically zero and numerically rounding noise (the gradient of an attention key
    bias, say) is compared against that floor instead of against its own noise. Positions where
    both are NaN (or the same infinity) count as equal. Integer and bool tensors must match exactly
    (error 0 or inf). With no floor, an all-zero expected tensor gives the absolute error.
    """
    if actual.shape != expected.shape or actual.dtype != expected.dtype or actual.device != expected.device:
        return math.inf
    a = actual.detach().to(expected.device, torch.float64)  # on the device: large GPU outputs stay fast
    e = expected.detach().to(torch.float64)
    if not expected.is_floating_point() and not expected.is_complex():
        return 0.0 if torch.equal(a, e) else math.inf
    same_special = (torch.isnan(a) & torch.isnan(e)) | (torch.isinf(e) & (a == e))
    if bool((~torch.isfinite(a) & ~same_special).any()) or bool((~torch.isfinite(e) & ~same_special).any()):
        return math.inf
    a = torch.where(same_special, 0.0, a)
    e = torch.where(same_special, 0.0, e)
    difference = float(torch.linalg.vector_norm(a - e))
    scale = max(float(torch.linalg.vector_norm(e)), floor_rms * math.sqrt(e.numel()))
    return difference / scale if scale > 0 else difference


def result_error(actual: Result, expected: Result, floor_rms: float = 0.0) -> tuple[float, str]:
    """The largest relative error over the tensors of `expected`, and the name of the worst one."""
    worst, worst_name = 0.0, ""
    for name, tensor in expected.items():
        error = relative_error(actual[name], tensor, floor_rms) if name in actual else math.inf
        if not error <= worst:  # also picks up the first NaN
            worst, worst_name = error, name
    extra = set(actual) - set(expected)
    if extra:
        return math.inf, f"unexpected {sorted(extra)[0]}"
    return worst, worst_name


def tolerance_for(expected: Result, autocast: bool) -> float:
    """The tolerance of a result: the loosest of its tensors' dtypes (autocast loosens float32)."""
    tolerance = 0.0
    for tensor in expected.values():
        if tensor.is_floating_point():
            dtype_tolerance = TOLERANCES.get(tensor.dtype, 1e-3)
            if autocast:
                dtype_tolerance = max(dtype_tolerance, AUTOCAST_TOLERANCE)
            tolerance = max(tolerance, dtype_tolerance)
    return tolerance or TOLERANCES[torch.float32]


@dataclass(frozen=True)
class Verdict:
    """Whether a compiled result is right, and the numbers that decided it."""

    passed: bool
    rel_error: float
    tolerance: float
    worst_tensor: str
    fp64_error: float | None = None
    eager_fp64_error: float | None = None
    fp64_sensitivity: float | None = None

    def explain(self) -> str:
        """A one-line reason for a failed verdict (empty when it passed)."""
        if self.passed:
            return ""
        text = f"wrong result: relative error {self.rel_error:.3g} > tolerance {self.tolerance:.3g} in {self.worst_tensor}"
        if self.fp64_error is not None and self.eager_fp64_error is not None:
            text += f" (vs float64: compiled {self.fp64_error:.3g}, eager {self.eager_fp64_error:.3g}"
            if self.fp64_sensitivity is not None:
                text += f"; float64 moved {self.fp64_sensitivity:.3g} under rounding-sized perturbations"
            text += ")"
        return text


def verdict(
    compiled: Result,
    eager: Result,
    *,
    autocast: bool = False,
    fp64_reference: Callable[[], Result] | None = None,
    fp64_perturbed: Callable[[int], Result] | None = None,
) -> Verdict:
    """Compare a compiled result with eager's; consult the float64 reference only if it is over tolerance.

    With a reference, a result over tolerance passes when its error against float64 is at most
    `FP64_MULTIPLIER` times eager's plus a tenth of the tolerance. An infinite error (shape, dtype,
    NaN) never passes.

    When that fails too and `fp64_perturbed(k)` is given (the float64 reference run again with its
    inputs and parameters moved by `PERTURBATION` relative noise, seed `k`), the
    reference's own movement is measured over `PERTURBED_RUNS` seeds: a result whose error is within
    `FP64_MULTIPLIER` times that movement passes. Gradients through ReLU kinks are that ill-conditioned:
    a pre-activation within 1e-7 of zero flips its mask under any float32 rounding, and one flipped
    element moved a BatchNorm bias gradient by 3% (resnet_tiny training, where eager's float32 happened
    to round the other way; over 12 inputs eager itself failed the float64 comparison on 2). An error the
    reference itself shows under rounding-sized noise cannot tell a wrong kernel from a right one.
    """
    tolerance = tolerance_for(eager, autocast)
    floor = tolerance * FLOOR_FRACTION
    error, worst = result_error(compiled, eager, floor)
    if error <= tolerance:
        return Verdict(True, error, tolerance, worst)
    if fp64_reference is None or not math.isfinite(error):
        return Verdict(False, error, tolerance, worst)
    reference = fp64_reference()
    compiled_64 = {name: t.double() if t.is_floating_point() else t for name, t in compiled.items()}
    eager_64 = {name: t.double() if t.is_floating_point() else t for name, t in eager.items()}
    compiled_error, _ = result_error(compiled_64, reference, floor)
    eager_error, _ = result_error(eager_64, reference, floor)
    passed = compiled_error <= FP64_MULTIPLIER * eager_error + tolerance / 10
    if passed or fp64_perturbed is None or not math.isfinite(compiled_error):
        return Verdict(passed, error, tolerance, worst, compiled_error, eager_error)
    sensitivity = max(result_error(fp64_perturbed(seed), reference, floor)[0] for seed in range(PERTURBED_RUNS))
    passed = compiled_error <= FP64_MULTIPLIER * max(eager_error, sensitivity) + tolerance / 10
    return Verdict(passed, error, tolerance, worst, compiled_error, eager_error, sensitivity)
