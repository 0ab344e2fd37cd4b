"""Strict OpInfo sweep: torch's OpInfo database through Kiln's real compile path, compared with eager.

Every OpInfo op, for each of a few dtypes it supports on CPU (float32, float64, int64, bool by
default), for its first ``--samples`` sample inputs, is compiled with ``frontend.compile`` (the
default ``inductor`` backend: capture, aotgrad, inductor_ir, C++ kernels) with ``fullgraph=True``
and ``fallback_to_eager=False``, run, and compared with eager. For float32 (``--grad-dtypes``) the
inputs require grad where the op supports autograd, so the training path is compiled and the
gradients (against a seeded random cotangent) are compared too. ``fallback_random=True``, so
random ops are compared bit for bit as well.

A case is one of:

* ``ok``: every output (and gradient) matches eager;
* ``wrong``: some value differs from eager (the worst outcome: a silent wrong answer);
* ``fallback``: a graph ran eagerly (``fallback_to_eager=False`` made it raise);
* ``graph_break``: capture could not take the whole function (``fullgraph=True`` made it raise);
* ``no_graph``: capture compiled no graph and ran the function eagerly although it does tensor work;
* ``lowering_error``: an inductor_ir lowering crashed and the op silently ran as a FallbackKernel;
* ``crash``: any other exception (or the worker process died), ``timeout``;
* ``skip``: not comparable (eager fails on the sample, nondeterministic, sparse, uninitialized values).

An op counts as compiled-and-matched when all its non-skipped cases are ``ok``. ATen ops that ran as
FallbackKernels (no lowering) are listed per op but are not failures. Usage::

    python tools/opinfo_strict.py [--samples 1] [--dtypes float32,float64,int64,bool] [--jobs 2]
        [--only name,...] [--limit N] [--json results.json] [--verbose]

``nox -s opinfo`` runs it; tests/test_opinfo_strict.py runs a CI-sized slice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

FAILURES = ("wrong", "fallback", "graph_break", "no_graph", "lowering_error", "crash", "timeout")
"""Case statuses that make an op fail, worst first."""

DEFAULT_DTYPES = ("float32", "float64", "int64", "bool")
GRAD_DTYPES = ("float32",)
# (rtol, atol) per dtype: generated kernels reorder reductions and use vectorized math.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-4, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}
GRAD_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {torch.float32: (1e-3, 1e-4), torch.float64: (1e-6, 1e-6)}
STRICT_OPTIONS = {"fallback_to_eager": False, "fallback_random": True}


@dataclass
class CaseResult:
    """One (op, dtype, sample) run: its status and, for failures, what went wrong."""

    op: str
    dtype: str
    sample: int
    grad: bool
    status: str
    detail: str = ""
    fallback_ops: list[str] = field(default_factory=list)
    seconds: float = 0.0


class _Skip(Exception):
    pass


class _Timeout(Exception):
    pass


def op_name(op: Any) -> str:
    """``name`` or ``name.variant`` of an OpInfo."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return fn(*args, **kwargs)


def op_database() -> dict[str, Any]:
    """Every OpInfo by `op_name` (torch's testing database).

    The random ops' OpInfo lambdas call ``wrapper_set_seed(op, ...)``, which seeds torch's generator
    inside the op; here it is a plain call instead, as each run is seeded by the sweep itself (capture
    puts such a torch.testing lambda into the graph as one call, so a seed set inside it would only
    happen while tracing).
    """
    import torch.testing._internal.common_methods_invocations as invocations

    invocations.wrapper_set_seed = _call  # type: ignore[assignment]
    return {op_name(op): op for op in invocations.op_db}


def _first_line(error: BaseException) -> str:
    """The error's type and first line, with capture's ``reason:`` line and the root cause."""
    text = str(error).strip().splitlines()
    reason = next((line.strip() for line in text if line.strip().startswith("reason:")), "")
    line = f"{type(error).__name__}: {text[0][:160] if text else ''}" + (f" ({reason[:200]})" if reason else "")
    root = _chain(error)[-1]
    if root is not error:
        root_text = str(root).strip().splitlines()
        line += f" <- {type(root).__name__}: {root_text[0][:240] if root_text else ''}"
    return line


def _chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def classify_error(error: BaseException) -> str:
    """The status of a compile or run that raised ``error``."""
    names = {type(e).__name__ for e in _chain(error)}
    if "BackendCompileError" in names:
        return "fallback"
    if names & {"GraphBreakError", "Unsupported", "InternalCaptureError"}:
        return "graph_break"
    if isinstance(error, _Timeout):
        return "timeout"
    return "crash"


def compare(got: Any, expected: Any, tolerances: dict[torch.dtype, tuple[float, float]]) -> str | None:
    """None when ``got`` matches ``expected`` (same structure, dtypes, shapes; values within tolerance)."""
    got_leaves, expected_leaves = pytree.tree_leaves(got), pytree.tree_leaves(expected)
    if len(got_leaves) != len(expected_leaves):
        return f"{len(got_leaves)} outputs, eager has {len(expected_leaves)}"
    for k, (a, b) in enumerate(zip(got_leaves, expected_leaves)):
        if isinstance(b, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"output {k} is {type(a).__name__}, eager gives a tensor"
            if a.dtype != b.dtype or a.shape != b.shape:
                return f"output {k}: {a.dtype} {list(a.shape)}, eager {b.dtype} {list(b.shape)}"
            rtol, atol = tolerances.get(b.dtype, (0.0, 0.0))
            try:
                torch.testing.assert_close(a.detach(), b.detach(), rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError as error:
                lines = [line.strip() for line in str(error).splitlines() if "difference" in line or "Mismatched" in line]
                return f"output {k}: " + "; ".join(lines)[:240]
        elif a != b and not (isinstance(b, float) and b != b and isinstance(a, float) and a != a):
            return f"output {k}: {a!r}, eager {b!r}"
    return None


class _Recorder:
    """Wraps ``inductor_ir.compile_graph`` to see the programs it builds (FallbackKernels, lowering errors)."""

    def __init__(self) -> None:
        import inductor_ir

        self.module = inductor_ir
        self.original = inductor_ir.compile_graph
        self.fallback_ops: set[str] = set()
        self.lowering_errors: list[str] = []

    def __enter__(self) -> _Recorder:
        def recording(*args: Any, **kwargs: Any) -> Any:
            compiled = self.original(*args, **kwargs)
            program = compiled.program
            for buf in program.buffers:
                op = str(getattr(buf, "op", ""))
                if type(buf).__name__ == "FallbackKernel" and "randint.low" not in op:
                    self.fallback_ops.add(op)
            self.lowering_errors += list(program.lowering_errors)
            return compiled

        self.module.compile_graph = recording
        return self

    def __exit__(self, *exc: object) -> None:
        self.module.compile_graph = self.original


def _flat_function(op: Any, sample: Any) -> tuple[Callable[..., Any], list[torch.Tensor]]:
    """The sample as ``fn(t0, t1, ...)`` over its tensors, and those tensors.

    The function is written out as source (``return op(t0, c0, [t1, t2], dim=c1)``, constants as
    globals) so that capture traces the op call itself, not the packing of its arguments.
    """
    tensors: list[torch.Tensor] = []
    namespace: dict[str, Any] = {"_op": op.op}

    def render(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            if value.layout != torch.strided:
                raise _Skip("sparse inputs")
            tensors.append(value)
            return f"t{len(tensors) - 1}"
        if type(value) in (list, tuple, torch.Size):  # a torch.Size as the tuple a user would write
            items = [render(v) for v in value]
            if type(value) is not list:
                return "(" + "".join(f"{item}, " for item in items) + ")"
            return "[" + ", ".join(items) + "]"
        if type(value) is dict and all(isinstance(k, str) for k in value):
            return "{" + ", ".join(f"{k!r}: {render(v)}" for k, v in value.items()) + "}"
        name = f"_c{len(namespace)}"
        namespace[name] = value
        return name

    call = [render(sample.input)] + [render(a) for a in sample.args]
    call += [f"{k}={render(v)}" for k, v in sample.kwargs.items()]
    params = ", ".join(f"t{k}" for k in range(len(tensors)))
    exec(f"def fn({params}):\n    return _op({', '.join(call)})\n", namespace)
    return namespace["fn"], tensors


def _fresh(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in tensors]


def _grads(
    outputs: Any, inputs: Sequence[torch.Tensor], drawn_as: Sequence[torch.dtype] | None = None
) -> list[torch.Tensor | None] | None:
    """Gradients of the outputs (against seeded random cotangents) with respect to ``inputs``.

    ``drawn_as``: per differentiable output, the dtype its cotangent is drawn in (a float64 reference
    run gets the low-precision run's cotangents, widened); default each output's own dtype.
    """
    wanted = [t for t in inputs if t.requires_grad]
    outs = [o for o in pytree.tree_leaves(outputs) if isinstance(o, torch.Tensor) and o.requires_grad]
    if not wanted or not outs:
        return None
    generator = torch.Generator().manual_seed(17)
    dtypes = list(drawn_as) if drawn_as is not None else [o.dtype for o in outs]
    cotangents = [torch.randn(o.shape, generator=generator, dtype=d).to(o.dtype) for o, d in zip(outs, dtypes)]
    return list(torch.autograd.grad(outs, wanted, cotangents, allow_unused=True))


_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _judged_by_reference(
    fn: Callable[..., Any],
    tensors: Sequence[torch.Tensor],
    expected: Any,
    got: Any,
    expected_grads: list[torch.Tensor | None] | None,
    got_grads: list[torch.Tensor | None] | None,
) -> str | None:
    """For a float16/bfloat16 case that differs from eager beyond the tolerances: the verdict against
    the same function run in float64 (the fuzzer's rule, tools/fuzz/compare.py: Kiln is wrong where
    its distance to the float64 result exceeds eager's own by a margin). Eager rounds every op's
    result where Kiln's fused kernels round once, so the two differ by a few units in the last place
    without either being wrong. Returns what is wrong, or None; a reference that cannot run says so.
    """
    try:
        from tools.fuzz.compare import compare_tensors
    except ImportError:  # run as `python tools/opinfo_strict.py`: tools/ is the import root
        from fuzz.compare import compare_tensors  # type: ignore[no-redef]

    wide = [
        t.detach().double().requires_grad_(t.requires_grad) if t.is_floating_point() else t.detach().clone()
        for t in tensors
    ]
    try:
        reference = fn(*wide)
        drawn = [o.dtype for o in pytree.tree_leaves(expected) if isinstance(o, torch.Tensor) and o.requires_grad]
        reference_grads = _grads(reference, wide, drawn) if expected_grads is not None else None
    except Exception as error:
        return f"differs from eager, and no float64 reference runs ({type(error).__name__})"
    pairs = [("output", pytree.tree_leaves(expected), pytree.tree_leaves(got), pytree.tree_leaves(reference))]
    if expected_grads is not None:
        pairs.append(("gradient", list(expected_grads), list(got_grads or []), list(reference_grads or [])))
    for what, eager_values, kiln_values, reference_values in pairs:
        for k, (e, g, r) in enumerate(zip(eager_values, kiln_values, reference_values)):
            if isinstance(e, torch.Tensor) and isinstance(g, torch.Tensor) and e.dtype in _LOW_PRECISION:
                why = compare_tensors(f"{what} {k}", e.detach(), g.detach(), r.detach() if isinstance(r, torch.Tensor) else None)
                if why is not None:
                    return why + " (against the float64 reference)"
    return None


def run_case(op: Any, sample: Any, dtype: torch.dtype, index: int, grad: bool) -> CaseResult:
    """Compile one sample of ``op`` strictly and compare it (and its gradients) with eager."""
    import frontend

    result = CaseResult(op_name(op), str(dtype).removeprefix("torch."), index, grad, "ok")
    fn, tensors = _flat_function(op, sample)
    if op.name.startswith(("empty", "new_empty")) or "empty" in op.name.split("_"):
        raise _Skip("uninitialized values")
    eager_inputs = _fresh(tensors)
    try:
        torch.manual_seed(0)
        expected = fn(*eager_inputs)
        torch.manual_seed(0)
        again = fn(*_fresh(tensors))
    except Exception as error:
        raise _Skip(f"eager fails ({type(error).__name__})") from None
    if any(isinstance(t, torch.Tensor) and t.layout != torch.strided for t in pytree.tree_leaves(expected)):
        raise _Skip("sparse outputs")
    if compare(again, expected, TOLERANCES) is not None:
        raise _Skip("nondeterministic")
    try:
        expected_grads = _grads(expected, eager_inputs) if grad else None
    except Exception:  # eager has no gradient here (an ill-defined loss, say): compare the forward only
        expected_grads = None
    result.grad = expected_grads is not None
    frontend.reset()
    with _Recorder() as recorder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = frontend.compile(fn, fullgraph=True, dynamic=False, options=STRICT_OPTIONS)
        inputs = _fresh(tensors)
        try:
            torch.manual_seed(0)
            got = compiled(*inputs)
            got_grads = _grads(got, inputs) if expected_grads is not None else None
        except Exception as error:
            result.status, result.detail = classify_error(error), _first_line(error)
            return result
    result.fallback_ops = sorted(recorder.fallback_ops)
    mismatch = compare(got, expected, TOLERANCES)
    if mismatch is None and expected_grads is not None:
        flags = [(o.requires_grad, e.requires_grad) for o, e in zip(pytree.tree_leaves(got), pytree.tree_leaves(expected))
                 if isinstance(e, torch.Tensor) and isinstance(o, torch.Tensor)]  # fmt: skip
        differing = [k for k, (a, b) in enumerate(flags) if a != b]
        if differing:
            k = differing[0]
            mismatch = f"output {k}: requires_grad={flags[k][0]}, eager {flags[k][1]}"
    if mismatch is None and expected_grads is not None:
        pairs = [(g, e) for g, e in zip(got_grads or [], expected_grads) if e is not None or g is not None]
        mismatch = compare([g for g, _ in pairs], [e for _, e in pairs], GRAD_TOLERANCES)
        mismatch = mismatch and f"gradient {mismatch}"
    if mismatch is not None and dtype in _LOW_PRECISION and ("Mismatched" in mismatch or "difference" in mismatch):
        # values only (not structure, dtypes or requires_grad): judged against float64
        mismatch = _judged_by_reference(fn, tensors, expected, got, expected_grads, got_grads)
    if mismatch is not None:
        result.status, result.detail = "wrong", mismatch
    elif recorder.lowering_errors:
        result.status, result.detail = "lowering_error", recorder.lowering_errors[0][:240]
    elif compiled.kiln_context.graphs_compiled == 0 and _does_tensor_work(expected, eager_inputs):
        result.status, result.detail = "no_graph", "capture compiled no graph; the function ran eagerly"
    return result


def _does_tensor_work(outputs: Any, inputs: Sequence[torch.Tensor]) -> bool:
    """Whether some output is a new tensor (not an input returned as it is)."""
    ids = {id(t) for t in inputs}
    return any(isinstance(o, torch.Tensor) and id(o) not in ids for o in pytree.tree_leaves(outputs))


def run_op(op: Any, dtypes: Sequence[str], samples: int, grad_dtypes: Sequence[str], timeout: int) -> list[CaseResult]:
    """Every (dtype, sample) case of one op; per-case time limit ``timeout`` seconds."""
    results: list[CaseResult] = []
    supported = op.supported_dtypes("cpu")
    for name in dtypes:
        dtype = getattr(torch, name)
        if dtype not in supported:
            continue
        grad = name in grad_dtypes and op.supports_autograd and dtype.is_floating_point
        try:
            sample_list = list(op.sample_inputs("cpu", dtype, requires_grad=grad))[:samples]
        except Exception as error:
            results.append(CaseResult(op_name(op), name, 0, grad, "skip", f"no samples ({type(error).__name__})"))
            continue
        for index, sample in enumerate(sample_list):
            started = time.perf_counter()
            previous = signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(timeout)
            try:
                case = run_case(op, sample, dtype, index, grad)
            except _Skip as skip:
                case = CaseResult(op_name(op), name, index, grad, "skip", str(skip))
            except _Timeout:
                case = CaseResult(op_name(op), name, index, grad, "timeout", f"over {timeout}s")
            except Exception as error:
                case = CaseResult(op_name(op), name, index, grad, classify_error(error), _first_line(error))
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, previous)
            case.seconds = round(time.perf_counter() - started, 2)
            results.append(case)
    return results


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def op_status(cases: Iterable[CaseResult]) -> str:
    """``ok``, ``skip`` (nothing comparable) or the worst failure among an op's cases."""
    statuses = {c.status for c in cases}
    for failure in FAILURES:
        if failure in statuses:
            return failure
    return "ok" if "ok" in statuses else "skip"


# ---------------------------------------------------------------------------------- workers
def _worker(names: list[str], options: argparse.Namespace) -> None:
    """Run ops one by one, printing ``{"start": name}`` then ``{"cases": [...]}`` JSON lines."""
    database = op_database()
    for name in names:
        print(json.dumps({"start": name}), flush=True)
        cases = run_op(database[name], options.dtypes, options.samples, options.grad_dtypes, options.timeout)
        print(json.dumps({"cases": [asdict(c) for c in cases]}), flush=True)


def _run_workers(names: list[str], options: argparse.Namespace, report: Callable[[list[CaseResult]], None]) -> None:
    """Spread ``names`` over ``options.jobs`` worker processes; a worker that dies is replaced."""
    queue = list(reversed(names))
    lock = threading.Lock()
    chunk = 64  # ops per worker process (each starts by loading the OpInfo database)

    def take() -> list[str]:
        with lock:
            batch = [queue.pop() for _ in range(min(chunk, len(queue)))]
        return batch

    def drive() -> None:
        batch = take()
        while batch:
            command = [sys.executable, os.path.abspath(__file__), "--worker", "--only", ",".join(batch),
                       "--dtypes", ",".join(options.dtypes), "--grad-dtypes", ",".join(options.grad_dtypes),
                       "--samples", str(options.samples), "--timeout", str(options.timeout)]  # fmt: skip
            process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            current, done = None, set()
            assert process.stdout is not None
            for line in process.stdout:
                message = json.loads(line) if line.startswith("{") else {}
                if "start" in message:
                    current = message["start"]
                elif "cases" in message:
                    report([CaseResult(**c) for c in message["cases"]])
                    done.add(current)
                    current = None
            code = process.wait()
            if current is not None:  # the worker died inside an op (a crashing kernel, say)
                report([CaseResult(current, "-", 0, False, "crash", f"worker process died (exit code {code})")])
                done.add(current)
            with lock:  # what a dead worker left undone goes back to the queue
                queue.extend(reversed([n for n in batch if n not in done]))
            batch = take()

    threads = [threading.Thread(target=drive) for _ in range(max(1, options.jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def summarize(results: dict[str, list[CaseResult]]) -> str:
    """The counts and one line per failing op."""
    statuses = {name: op_status(cases) for name, cases in results.items()}
    counted = [n for n, s in statuses.items() if s != "skip"]
    matched = [n for n in counted if statuses[n] == "ok"]
    by_status = Counter(statuses[n] for n in counted)
    cases = [c for cs in results.values() for c in cs if c.status != "skip"]
    with_fallback_kernels = sum(1 for n in matched if any(c.fallback_ops for c in results[n]))
    lines = [
        f"OpInfo ops: {len(results)}; with comparable cases: {len(counted)}",
        f"compiled and matched (every case): {len(matched)}/{len(counted)} = {100 * len(matched) / max(len(counted), 1):.1f}%",
        f"ops with wrong values: {by_status['wrong']}; failing by status: "
        + ", ".join(f"{s} {by_status[s]}" for s in FAILURES if by_status[s]),
        f"cases: {len(cases)} ({', '.join(f'{s} {n}' for s, n in Counter(c.status for c in cases).most_common())})",
        f"matched ops running some ATen op as a FallbackKernel: {with_fallback_kernels}",
    ]
    for status in FAILURES:
        for name in sorted(n for n in counted if statuses[n] == status):
            case = next(c for c in results[name] if c.status == status)
            grad = " (training)" if case.grad else ""
            lines.append(f"  {status:14s} {name} [{case.dtype} sample {case.sample}{grad}]: {case.detail}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """Run the sweep and print (and optionally save) its summary."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES))
    parser.add_argument("--grad-dtypes", default=",".join(GRAD_DTYPES))
    parser.add_argument("--only", default="")
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--json", default="")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    options.dtypes = [d for d in options.dtypes.split(",") if d]
    options.grad_dtypes = [d for d in options.grad_dtypes.split(",") if d]
    only = [n for n in options.only.split(",") if n]
    warnings.filterwarnings("ignore")
    if options.worker:
        _worker(only, options)
        return 0
    known = op_database()
    unknown = [name for name in only if name not in known]
    if unknown:
        for name in unknown:
            close = sorted(n for n in known if n.startswith(name) or name.split(".")[-1] in n)[:6]
            print(f"not an OpInfo name: {name!r}" + (f" (did you mean: {', '.join(close)}?)" if close else ""))
        return 2
    names = only or sorted(known)
    if options.limit:
        names = names[: options.limit]
    results: dict[str, list[CaseResult]] = {}
    started = time.perf_counter()

    def report(cases: list[CaseResult]) -> None:
        for case in cases:
            results.setdefault(case.op, []).append(case)
        if options.json:  # as they come, so that a long run that stops keeps what it did
            with open(options.json + "l", "a") as handle:
                handle.writelines(json.dumps(asdict(c)) + "\n" for c in cases)
        if options.verbose and cases:
            name = cases[0].op
            status = op_status(results[name])
            failed = next((c for c in results[name] if c.status == status and status in FAILURES), None)
            detail = f" [{failed.dtype}] {failed.detail[:150]}" if failed else ""
            print(f"{name:45s} {status:14s} {len(results)}/{len(names)}{detail}", flush=True)

    _run_workers(names, options, report)
    print(summarize(results))
    print(f"wall time {time.perf_counter() - started:.0f}s")
    if options.json:
        with open(options.json, "w") as handle:
            json.dump({n: [asdict(c) for c in cs] for n, cs in sorted(results.items())}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
