"""Kiln's run against eager's: the verdict of one program.

Rules:
* Where eager raises, Kiln must raise an exception of the same type (anywhere in its chain).
* Kiln raising where eager does not is a failure ("kiln_error").
* Every compared tensor (outputs, arguments after the call, gradients) must have eager's dtype and
  shape, and each output eager's requires_grad; strides may differ; a missing gradient equals zeros.
* Integers and bools are exact, except where the value came out of floating-point rounding: a
  position counts only where eager agrees with the float64 reference run (eager, with every float
  made float64), since elsewhere rounding already decided it.
* Floats: a position is wrong when Kiln's distance to the float64 reference exceeds eager's own
  distance by a margin (``err_kiln > 8 * err_eager + atol * scale + rtol * |ref|``, `scale` being the
  tensor's mean magnitude, at least 1, so values near zero meet an absolute floor) and eager's
  largest error anywhere in the tensor (a reduction's rounding moves every output); NaN counts as
  infinitely far from a number and at zero distance from NaN, so NaN positions must match unless
  eager's NaN is itself a rounding artefact. Without a usable reference, Kiln is held to eager.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

MARGIN_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-9, 1e-9),
}
"""dtype -> (rtol, atol) added to the margin over eager's own error."""
ERROR_FACTOR = 8.0


@dataclass(frozen=True)
class RunOutcome:
    """What one run produced: `harness.run`'s dict, or the exception (type names along its chain, message)."""

    result: dict[str, list[Any]] | None
    error_types: tuple[str, ...] = ()
    error: str = ""

    @staticmethod
    def of_exception(error: BaseException) -> RunOutcome:
        """The outcome of a run that raised `error`."""
        names: list[str] = []
        seen: BaseException | None = error
        while seen is not None and len(names) < 8:
            names += [klass.__name__ for klass in type(seen).__mro__ if klass not in (BaseException, Exception, object)]
            seen = seen.__cause__ or seen.__context__
        message = f"{type(error).__name__}: {error}".strip()
        return RunOutcome(None, tuple(dict.fromkeys(names)), message[:2000])


@dataclass(frozen=True)
class Verdict:
    """The comparison's result.

    Attributes:
        kind: "ok", "mismatch" (values, dtype, shape or requires_grad differ), "kiln_error" (Kiln
            raised, eager did not), "exception_mismatch" (eager raised, Kiln did not or raised
            another type), or, set by the runner, "crash" / "hang".
        where: what differed: "outputs[1]", "grads[0]", "args[2]" ...
        detail: one paragraph for a human: the first wrong position with eager's, Kiln's and the
            reference's values, or the exception.
    """

    kind: str
    where: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Whether the program passed."""
        return self.kind == "ok"


def _distance(a: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """|a - r| in float64, with NaN-to-NaN and equal infinities at 0, NaN-to-number at infinity."""
    d = (a - r).abs()
    d = torch.where(a == r, torch.zeros_like(d), d)
    both_nan = a.isnan() & r.isnan()
    d = torch.where(d.isnan(), torch.full_like(d, float("inf")), d)
    return torch.where(both_nan, torch.zeros_like(d), d)


def _scale(r: torch.Tensor) -> float:
    finite = r[torch.isfinite(r)]
    return max(1.0, float(finite.abs().mean())) if finite.numel() else 1.0


def _worst(error: torch.Tensor) -> float:
    """Eager's largest finite error over a tensor: where outputs share statistics (a batch norm's mean
    and variance), eager's error lands on some positions and Kiln's on others, both of one size."""
    finite = error[torch.isfinite(error)]
    return float(finite.max()) if finite.numel() else 0.0


def _usable(ref: torch.Tensor | None, like: torch.Tensor) -> bool:
    return ref is not None and ref.shape == like.shape and ref.is_floating_point() == like.is_floating_point()


def _describe(where: str, bad: torch.Tensor, e: torch.Tensor, k: torch.Tensor, r: torch.Tensor | None) -> str:
    count = int(bad.sum())
    first = tuple(int(i) for i in bad.nonzero()[0]) if bad.dim() else ()
    ref = f", float64 reference {r[first].item()!r}" if r is not None and _usable(r, e) else ""
    return (
        f"{where}: {count} of {bad.numel()} values differ (shape {tuple(e.shape)}, {e.dtype}); "
        f"first at {first}: eager {e[first].item()!r}, Kiln {k[first].item()!r}{ref}"
    )


def _tolerances(dtype: torch.dtype, floor: torch.dtype | None) -> tuple[float, float]:
    own = MARGIN_TOLERANCES[dtype]
    if floor is None or floor not in MARGIN_TOLERANCES:
        return own
    low = MARGIN_TOLERANCES[floor]
    return max(own[0], low[0]), max(own[1], low[1])


def compare_tensors(where: str, e: Any, k: Any, r: Any, floor: torch.dtype | None = None) -> str | None:
    """Why Kiln's tensor `k` is wrong against eager's `e` (with reference `r`), or None.

    `floor` is the least precise float dtype the program computes in: a float64 result of a
    float32 computation is held to float32's tolerances.
    """
    if e is None or k is None:
        present = k if e is None else e
        if present is None or not present.count_nonzero():
            return None
        return f"{where}: None in {'eager' if e is None else 'Kiln'}, a nonzero tensor in the other"
    if e.dtype != k.dtype:
        return f"{where}: dtype {e.dtype} in eager, {k.dtype} in Kiln"
    if e.shape != k.shape:
        return f"{where}: shape {tuple(e.shape)} in eager, {tuple(k.shape)} in Kiln"
    if not e.is_floating_point():
        bad = e != k
        if _usable(r, e) and r.dtype == e.dtype:
            bad &= e == r
        return _describe(where, bad, e, k, r) if bool(bad.any()) else None
    e64, k64 = e.double(), k.double()
    rtol, atol = _tolerances(e.dtype, floor)
    close = torch.isclose(k64, e64, rtol=rtol, atol=atol, equal_nan=True)
    if bool(close.all()):
        return None
    if _usable(r, e):
        r64 = r.double()
        eager_error = _distance(e64, r64)
        bound = ERROR_FACTOR * eager_error + atol * _scale(r64) + rtol * r64.abs().nan_to_num(0.0, 0.0, 0.0)
        kiln_error = _distance(k64, r64)
        bad = (kiln_error > bound) & (kiln_error > _worst(eager_error)) & ~close
    else:
        bad = (_distance(k64, e64) > 10 * (atol * _scale(e64) + rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0))) & ~close
    return _describe(where, bad, e, k, r) if bool(bad.any()) else None


def _same_exception(eager: RunOutcome, kiln: RunOutcome) -> bool:
    return bool(eager.error_types) and eager.error_types[0] in kiln.error_types


def compare(eager: RunOutcome, kiln: RunOutcome, ref: RunOutcome | None, floor: torch.dtype | None = None) -> Verdict:
    """The verdict on Kiln's run of a program against eager's (and the float64 reference).

    `floor`: the least precise float dtype the program computes in (see `compare_tensors`).
    """
    if eager.result is None:
        if kiln.result is None and _same_exception(eager, kiln):
            return Verdict("ok", "exception", eager.error)
        got = kiln.error if kiln.result is None else "no exception"
        return Verdict("exception_mismatch", "exception", f"eager raised {eager.error}; Kiln: {got}")
    if kiln.result is None:
        return Verdict("kiln_error", "exception", kiln.error)
    reference = ref.result if ref is not None and ref.result is not None else {}
    for key, expected in eager.result.items():
        actual = kiln.result.get(key)
        if actual is None:
            why = {
                "grads": "no output of Kiln's requires grad, so there are no gradients",
                "grads2": "Kiln's first-order gradients do not require grad (create_graph=True lost the graph), "
                "so there are no second-order gradients",
            }.get(key, "missing")
            return Verdict("mismatch", key, f"{key}: eager computes {len(expected)}; {why}")
        if len(actual) != len(expected):
            return Verdict("mismatch", key, f"{key}: eager has {len(expected)} values, Kiln {len(actual)}")
        if key == "requires_grad":
            for i, (want, got) in enumerate(zip(expected, actual)):
                if want != got:
                    return Verdict("mismatch", f"{key}[{i}]", f"output {i}: requires_grad {want} in eager, {got} in Kiln")
            continue
        refs = reference.get(key) or [None] * len(expected)
        for i, (e, k) in enumerate(zip(expected, actual)):
            problem = compare_tensors(f"{key}[{i}]", e, k, refs[i] if i < len(refs) else None, floor)
            if problem:
                return Verdict("mismatch", f"{key}[{i}]", problem)
    return Verdict("ok")
