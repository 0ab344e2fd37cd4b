"""Running one program: eagerly, eagerly in float64 (the reference), and through Kiln.

Kiln targets ("backends" of the fuzzer):
* "cpp": ``frontend.compile(fn)``, the inductor backend with codegen_cpp's C++ kernels (CPU default);
* "triton": the same, with codegen_triton's kernels on CPU tensors in Triton's interpreter (needs
  TRITON_INTERPRET=1 before triton is imported; the worker sets it). The frontend picks the kernel
  backend by device, so this target swaps `load_kernel_backend` for the compile, as the frontend's
  own Triton-path test does;
* "cuda": the inductor backend on a GPU (real Triton kernels): inputs are made on the GPU, the eager
  run compared against is eager on the GPU too, and the float64 reference stays on the CPU;
* "aot_eager" / "eager": the frontend's triage backends (capture + aotgrad, capture only).
Every Kiln run uses ``fallback_to_eager=False``: a graph Kiln cannot compile raises instead of
quietly running eagerly (and passing).
"""

from __future__ import annotations

import contextlib
import linecache
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from tools.fuzz import harness
from tools.fuzz.compare import RunOutcome, Verdict, compare
from tools.fuzz.program import Program, render
from tools.fuzz.report import layout_kinds

TARGETS = ("cpp", "triton", "cuda", "aot_eager", "eager")


def load(program: Program, ref: bool = False, device: str = "cpu") -> dict[str, Any]:
    """The program's module namespace (its source registered with linecache, so tracebacks show lines);
    its inputs are made on `device`."""
    source = render(program, ref)
    filename = f"<kiln-fuzz-{program.seed}{'-ref' if ref else ''}-{abs(hash(source)) % 10**8}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"kiln_fuzz_{program.seed}"}
    exec(compile(source, filename, "exec"), namespace)
    namespace["DEVICE"] = device
    return namespace


Call = tuple[int, bool]
"""One call's inputs: sizes grown by that much (`harness.grown`), and whether in another memory layout."""


def calls_of(program: Program) -> list[Call]:
    """The calls `check` makes: twice at the leaves' own sizes, then at each grown size, then
    (`program.relayout`) once in another memory layout."""
    return [(0, False), (0, False), *((grow, False) for grow in program.grows), *([(0, True)] if program.relayout else [])]


def _outcome(fn: Any, namespace: dict[str, Any], mode: str, ref: bool, call: Call = (0, False)) -> RunOutcome:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return RunOutcome(harness.run(fn, namespace["make_inputs"], mode, ref, namespace.get("AUTOCAST"), *call))
    except Exception as error:
        return RunOutcome.of_exception(error)


def device_of(target: str) -> str:
    """Where `target`'s inputs live."""
    return "cuda" if target == "cuda" else "cpu"


def run_eager(program: Program, ref: bool = False, device: str = "cpu", call: Call = (0, False)) -> RunOutcome:
    """Eager PyTorch's run (`ref=True`: every float made float64; `call`: on other inputs, see `Call`)."""
    namespace = load(program, ref, device)
    return _outcome(namespace["program"], namespace, program.mode, ref, call)


@contextlib.contextmanager
def _triton_on_cpu() -> Iterator[None]:
    """Within the block, the inductor backend compiles CPU graphs with codegen_triton (interpreted)."""
    import codegen_triton
    from frontend.backends import inductor as inductor_backend

    def triton_on_cpu(device_type: str, config: Any) -> Any:
        options = codegen_triton.TritonBackend.parse_options(config.kernel_backend_options("cuda"))
        return codegen_triton.TritonBackend("cpu", options)

    original = inductor_backend.load_kernel_backend
    inductor_backend.load_kernel_backend = triton_on_cpu
    try:
        yield
    finally:
        inductor_backend.load_kernel_backend = original


def run_kiln(program: Program, target: str = "cpp", calls: Sequence[Call] = ((0, False),)) -> list[RunOutcome]:
    """Kiln's runs of `program` through `target` (see the module docstring), one per entry of
    `calls` on fresh inputs (the later calls reuse the compiled code, or recompile for new sizes
    or layouts); capture's cache is reset after."""
    import frontend

    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    namespace = load(program, device=device_of(target))
    backend = "inductor" if target in ("cpp", "triton", "cuda") else target
    patch = _triton_on_cpu() if target == "triton" else contextlib.nullcontext()
    try:
        with patch:
            # check_ir: every lowered program and schedule is checked against the rules the kernel
            # generators rely on (a broken one is reported as an error, before it can compute garbage).
            options = {"fallback_to_eager": False, "inductor_ir.check_ir": True}
            compiled = frontend.compile(namespace["program"], backend=backend, options=options)
            return [_outcome(compiled, namespace, program.mode, False, call) for call in calls]
    finally:
        frontend.reset()


def check(program: Program, target: str = "cpp") -> Verdict:
    """Run `program` eagerly, in float64 and through Kiln's `target`, once per call of `calls_of`
    (twice at its own sizes, at grown sizes, in another memory layout); the comparison's verdict.

    The second call reuses the compiled code, so state kept between calls (buffers, caches, an
    input mutated in place and read again) gets checked too. The calls at grown sizes check the
    guards on sizes and the recompiled graph with symbolic sizes (automatic dynamic shapes); the
    call in another memory layout, the guards on strides.
    """
    if target == "cuda" and not torch.cuda.is_available():  # else every program would "match": both raise
        raise RuntimeError("the cuda target needs a CUDA device")
    device = device_of(target)
    eager = run_eager(program, device=device)
    if _device_assert(eager):
        return Verdict("skipped", "exception", f"eager's GPU kernels asserted ({eager.error[:200]})")
    ref = run_eager(program, ref=True)
    floor = precision_floor(program)
    calls = calls_of(program) if eager.result is not None else calls_of(program)[:2]
    runs = run_kiln(program, target, calls)
    if any(_device_assert(run) for run in runs):
        # A device-side assert leaves the process's CUDA context unusable: whatever Kiln raised, no
        # comparison with eager's run means anything now (the worker restarts after this program).
        return Verdict("skipped", "exception", f"a GPU kernel asserted ({next(r.error for r in runs if r.error)[:200]})")
    verdict = compare(eager, runs[0], ref, floor)
    if verdict.kind == "mismatch" and eager_depends_on_layout(program, runs[0], device, floor):
        return Verdict("eager_layout_bug", verdict.where, "eager's own values change when its inputs are made "
                       f"contiguous, and Kiln's match that contiguous run: {verdict.detail}")
    if verdict.kind == "mismatch" and target == "triton" and interpreter_flushed_subnormals(program, runs[0], floor):
        return Verdict("interpreter_artifact", verdict.where, "Triton's interpreter reads bfloat16 subnormals as 0: "
                       f"eager on inputs with them flushed to zero matches Kiln: {verdict.detail}")
    if not verdict.ok or eager.result is None:
        return verdict
    for number, (call, run) in enumerate(zip(calls[1:], runs[1:]), start=2):
        if call != (0, False):
            eager, ref = run_eager(program, device=device, call=call), run_eager(program, ref=True, call=call)
        again = compare(eager, run, ref, floor)
        if again.kind == "mismatch" and target == "triton" and interpreter_flushed_subnormals(program, run, floor, call):
            return Verdict("interpreter_artifact", again.where, "Triton's interpreter reads bfloat16 subnormals as 0: "
                           f"eager on inputs with them flushed to zero matches Kiln (call {number}): {again.detail}")
        if not again.ok:
            where = f"call {number}" + (f", sizes grown by {call[0]}" if call[0] else "") + (", inputs relaid out" if call[1] else "")
            return Verdict(again.kind, f"{where}: {again.where}", f"the first call matched; call {number}: {again.detail}")
    return verdict


def eager_depends_on_layout(program: Program, kiln: RunOutcome, device: str, floor: torch.dtype | None) -> bool:
    """Whether eager is the one that is wrong: its result changes when every input is made
    contiguous first, and Kiln's result is the contiguous one.

    A pure function's values do not depend on its inputs' strides, so such a difference is an eager
    kernel reading a strided input wrongly (torch's CPU batch-norm backward with a stepped weight is
    one). Inputs the program writes into (their version counter moves, through any alias) stay as
    they are: there a contiguous copy would rightly change what the program does.
    """
    if not layout_kinds(program):
        return False
    namespace = load(program, device=device)
    original = namespace["program"]
    written: set[int] = set()

    def noting_writes(*args: Any) -> Any:
        before = [a._version if isinstance(a, torch.Tensor) else None for a in args]
        try:
            return original(*args)
        finally:
            written.update(i for i, (a, v) in enumerate(zip(args, before)) if v is not None and a._version != v)

    if _outcome(noting_writes, namespace, program.mode, False).result is None:
        return False

    def on_contiguous_inputs(*args: Any) -> Any:
        return original(*(a.contiguous() if isinstance(a, torch.Tensor) and i not in written else a
                          for i, a in enumerate(args)))

    contiguous = _outcome(on_contiguous_inputs, namespace, program.mode, False)
    return contiguous.result is not None and compare(contiguous, kiln, None, floor).ok


def _flush_bfloat16_subnormals(value: Any) -> Any:
    """A bfloat16 tensor with its subnormal values as zeros of their sign (other values unchanged)."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bfloat16:
        return value
    subnormal = (value != 0) & (value.abs() < torch.finfo(torch.bfloat16).tiny)
    return torch.where(subnormal, value * 0, value).requires_grad_(value.requires_grad) if subnormal.any() else value


def interpreter_flushed_subnormals(
    program: Program, kiln: RunOutcome, floor: torch.dtype | None, call: Call = (0, False)
) -> bool:
    """Whether a mismatch on the triton target is the interpreter's: Triton's interpreter (the CPU
    tier) reads bfloat16 subnormals as 0, where GPUs and eager keep them. True when some bfloat16 input
    holds subnormals and eager, on the inputs with them flushed to zero, gives Kiln's result. An input
    the program writes into is flushed as a copy, so the arguments after the call then differ and
    such a program is never excused."""
    if not any(leaf.dtype == "bfloat16" for leaf in program.leaves):
        return False
    namespace = load(program)
    original = namespace["program"]
    flushed_any = False

    def on_flushed_inputs(*args: Any) -> Any:
        nonlocal flushed_any
        flushed = [_flush_bfloat16_subnormals(a) for a in args]
        flushed_any = flushed_any or any(f is not a for f, a in zip(flushed, args))
        return original(*flushed)

    outcome = _outcome(on_flushed_inputs, namespace, program.mode, False, call)
    return flushed_any and outcome.result is not None and compare(outcome, kiln, None, floor).ok


def _device_assert(outcome: RunOutcome) -> bool:
    """Whether a run hit a CUDA device-side assert (eager's index checks on a GPU, Kiln's `tl.device_assert`)."""
    return "device-side assert" in outcome.error


def precision_floor(program: Program) -> torch.dtype | None:
    """The least precise float dtype `program` computes in (None: no floats at all)."""
    order = ("bfloat16", "float16", "float32", "float64")
    names = program.float_dtypes()
    return next((getattr(torch, name) for name in order if name in names), None)
