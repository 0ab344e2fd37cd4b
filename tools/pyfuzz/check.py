"""Running one generated program eagerly and through Kiln, call by call, and comparing.

Each program is called seven times (`CALLS`): twice on new values, once after module state changed
(a global rebound, an object's attribute set: guards must notice), once with another int argument,
twice at another batch size, and once at a third batch size with an infinity in each input. After every call its results (tensors, ints, floats) and what it
did to module state (`observed()` in the prelude: printed text, a dict, an object, a global) must
equal eager's; where eager raises, Kiln must raise the same exception type.
"""

from __future__ import annotations

import linecache
import math
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from tools.fuzz.compare import Verdict
from tools.pyfuzz.generator import PyProgram

__all__ = ["CALLS", "Call", "Verdict", "check", "compare", "run_calls"]


@dataclass(frozen=True)
class Call:
    """One call: the inputs' rows and seed, the int argument, and module state set before it."""

    rows: int
    seed: int
    n: int
    scale: float | None = None  # SCALE rebound before the call
    bias: float | None = None  # OBJ.bias set before the call
    infinite: bool = False  # x[0, 0] is inf and y[1, 2] -inf (item() floats, their saved copies, nan from inf - inf)

    def arguments(self, perturbed: bool = False) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The call's arguments; `perturbed`: each value moved by a relative 1e-6 or so (see `check`)."""
        generator = torch.Generator().manual_seed(self.seed)
        a, b = torch.randn(self.rows, 5, generator=generator), torch.randn(self.rows, 5, generator=generator)
        if perturbed:
            a = a * (1 + PERTURBATION * torch.randn(a.shape, generator=generator))
            b = b * (1 + PERTURBATION * torch.randn(b.shape, generator=generator))
        if self.infinite:
            a[0, 0], b[1 % self.rows, 2] = float("inf"), float("-inf")
        return a, b, self.n


PERTURBATION = 1e-6
"""The relative size of the input perturbation that tells rounding-sensitive programs apart: about
the rounding difference between a compiled kernel and eager's (other summation orders, fused
operations), far below the comparison's tolerance."""


CALLS = (
    Call(4, 1, 3),
    Call(4, 2, 3),
    Call(4, 3, 3, scale=3.0, bias=-1.0),
    Call(4, 4, -2),
    Call(6, 5, 3),
    Call(7, 6, 3),
    Call(5, 7, 3, infinite=True),
)


@dataclass(frozen=True)
class Outcome:
    """A call's results and observed state, or the exception it raised."""

    result: Any = None
    observed: Any = None
    error: BaseException | None = None


class _Timeout(Exception):
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: Any) -> None:
        raise _Timeout(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _namespace(program: PyProgram, tag: str) -> dict[str, Any]:
    filename = f"<kiln-pyfuzz-{program.seed}-{tag}>"
    linecache.cache[filename] = (len(program.source), None, program.source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"kiln_pyfuzz_{program.seed}_{tag}"}
    exec(compile(program.source, filename, "exec"), namespace)
    return namespace


def _snapshot(result: Any) -> Any:
    if isinstance(result, torch.Tensor):
        return result.detach().clone()
    if isinstance(result, (list, tuple)):
        return type(result)(_snapshot(r) for r in result)
    return result


def _tensors(result: Any) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return [t for r in result for t in _tensors(r)]
    return []


def _gradients(result: Any, inputs: tuple[torch.Tensor, ...], seed: int) -> list[torch.Tensor] | None:
    """The gradients of `inputs` for seeded random cotangents of the results that require grad
    (zeros where an input is unused, as eager leaves None); None when no result requires grad."""
    outputs = [t for t in _tensors(result) if t.requires_grad]
    if not outputs:
        return None
    generator = torch.Generator().manual_seed(1000 + seed)
    cotangents = [torch.randn(t.shape, generator=generator, dtype=t.dtype) for t in outputs]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True)
    return [torch.zeros_like(i) if g is None else g for i, g in zip(inputs, grads)]


def run_calls(program: PyProgram, compiler: Callable[[Callable[..., Any]], Callable[..., Any]] | None,
              tag: str, timeout: float = 60.0, perturbed: bool = False) -> list[Outcome]:
    """Every call of `CALLS` on a fresh module of `program`, its function passed through `compiler`
    (`perturbed`: on the calls' perturbed arguments). A program whose module sets ``GRAD = True``
    takes inputs that require grad, and each call's result is followed by the inputs' gradients."""
    namespace = _namespace(program, tag)
    fn = namespace["program"] if compiler is None else compiler(namespace["program"])
    grad = bool(namespace.get("GRAD", False))
    outcomes = []
    for call in CALLS:
        if call.scale is not None:
            namespace["SCALE"] = call.scale
        if call.bias is not None:
            namespace["OBJ"].bias = call.bias
        try:
            with _deadline(timeout):
                x, y, n = call.arguments(perturbed)
                if grad:
                    x.requires_grad_()
                    y.requires_grad_()
                result = fn(x, y, n)
                if grad:
                    result = (result, _gradients(result, (x, y), call.seed))
                result = _snapshot(result)
            outcomes.append(Outcome(result, namespace["observed"]()))
        except _Timeout:
            raise
        except Exception as error:
            outcomes.append(Outcome(error=error, observed=namespace["observed"]()))
    return outcomes


def _same(expected: Any, actual: Any, path: str) -> str | None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return f"{path}: a tensor in eager, {type(actual).__name__} in Kiln"
        if expected.shape != actual.shape or expected.dtype != actual.dtype:
            return f"{path}: {tuple(expected.shape)} {expected.dtype} in eager, {tuple(actual.shape)} {actual.dtype} in Kiln"
        if not torch.allclose(expected, actual, rtol=1e-5, atol=1e-6, equal_nan=True):
            worst = (expected.double() - actual.double()).abs().nan_to_num(0.0).max().item()
            return f"{path}: values differ (largest difference {worst:.3g})"
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(expected) != len(actual):
            return f"{path}: {expected!r:.200} in eager, {actual!r:.200} in Kiln"
        for k, (e, a) in enumerate(zip(expected, actual)):
            problem = _same(e, a, f"{path}[{k}]")
            if problem:
                return problem
        return None
    if isinstance(expected, float) and isinstance(actual, float):
        if math.isclose(expected, actual, rel_tol=1e-5, abs_tol=1e-6) or (math.isnan(expected) and math.isnan(actual)):
            return None
    elif type(expected) is type(actual) and expected == actual:
        return None
    return f"{path}: {expected!r:.200} in eager, {actual!r:.200} in Kiln"


def compare(eager: list[Outcome], kiln: list[Outcome]) -> Verdict:
    """The verdict on Kiln's calls against eager's (`tools.fuzz`'s kinds: ok, mismatch,
    exception_mismatch, kiln_error; `check` adds hang and skipped)."""
    for number, (e, k) in enumerate(zip(eager, kiln), start=1):
        where = f"call {number} ({CALLS[number - 1]})"
        if e.error is not None:
            if k.error is None:
                return Verdict("exception_mismatch", where, f"eager raised {e.error!r:.300}; Kiln returned")
            if not isinstance(k.error, type(e.error)):
                return Verdict("exception_mismatch", where, f"eager raised {e.error!r:.300}; Kiln {k.error!r:.300}")
        elif k.error is not None:
            return Verdict("kiln_error", where, f"{type(k.error).__name__}: {k.error}"[:1500])
        else:
            problem = _same(e.result, k.result, "result")
            if problem:
                return Verdict("mismatch", where, problem)
        problem = _same(e.observed, k.observed, "state")
        if problem:
            return Verdict("mismatch", where, "module state: " + problem)
    return Verdict("ok")


def check(program: PyProgram, target: str = "eager", timeout: float = 60.0) -> Verdict:
    """Run `program` eagerly and through ``frontend.compile(backend=target)``; the verdict."""
    import frontend

    capture_only = False
    try:
        eager = run_calls(program, None, "eager", timeout)
        # A backend that generates kernels rounds differently from eager (summation order, fused
        # operations); a program whose branches on tensor values turn on such a rounding is
        # ill-conditioned, not evidence: eager on inputs moved by about that much must agree first.
        # Such a program is still checked through capture alone (eager's kernels, eager's rounding),
        # so that the Python around its tensor code is not left untested.
        if target not in ("eager", "aot_eager") and compare(eager, run_calls(program, None, "eager-perturbed", timeout, True)).kind != "ok":
            capture_only, target = True, "eager"
    except _Timeout:
        return Verdict("skipped", "", "eager itself did not finish")
    try:
        kiln = run_calls(program, lambda fn: frontend.compile(fn, backend=target), "kiln", timeout)
    except _Timeout as error:
        return Verdict("hang", "", str(error))
    finally:
        frontend.reset()
    verdict = compare(eager, kiln)
    if not capture_only:
        return verdict
    note = "ill-conditioned (eager's own results move with a 1e-6 perturbation of the inputs): checked through capture alone"
    if verdict.ok:
        return Verdict("capture_only", "", note)
    return Verdict(verdict.kind, verdict.where, f"{verdict.detail} [{note}]")
