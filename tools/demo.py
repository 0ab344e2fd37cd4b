"""Kiln's main job (`nox -s demo`): compile the seed tutorial's kinds of programs and report.

Rows: a function (the tutorial's sin+cos), a module (Linear+ReLU), a small ResNet-style conv net
(inference and a training step) and a small transformer built from a `transformers` config with
random weights (no downloads); on the CPU, and on a GPU when one is present (plus
mode="reduce-overhead"). Each row checks the compiled result against eager PyTorch on fresh random
inputs and prints, per row: graphs captured, graph breaks (with the line of each), kernels
generated (and the three largest fusions by name, from the compiled function's
``kiln_context.kernels``), compile seconds, the speedup over eager and the error against eager. A
row slower than eager says where its time goes (ATen calls vs Kiln's own kernels, measured with
torch.profiler). The training rows compile the model, as docs/getting-started.md does, and call
``loss.backward()`` outside it: the compiled backward runs inside autograd, with no graph break.

It always runs to completion: a row that fails says where (import, compile, run, check) and why,
and the table goes on. Exit status is 0 unless --strict is given and a row failed.

Usage: python tools/demo.py [--quick] [--strict] [--device cpu|cuda|all] [--row NAME] [--traceback]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

ROW_TIME_LIMIT_S = 75  # one row may not take longer than this (compile included)
TIMING_BUDGET_MS = 10_000.0  # per row, for the eager-vs-Kiln timing loop
TOTAL_TIME_LIMIT_S = 210  # per device: rows not started by then are reported as skipped (~4 min on a CPU)


@dataclass
class Row:
    """One program to compile: how to build it and its inputs, and how to compile it."""

    name: str
    build: Callable[[torch.device], tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]]
    mode: str | None = None
    training: bool = False
    devices: tuple[str, ...] = ("cpu", "cuda")
    tolerance: float = 1e-3


@dataclass
class Result:
    """What one row measured, or where it failed."""

    row: str
    device: str
    status: str = "ok"
    detail: str = ""
    graphs: int | None = None
    breaks: int | None = None
    compile_s: float | None = None
    eager_ms: float | None = None
    kiln_ms: float | None = None
    max_error: float | None = None
    fallbacks: list[str] = field(default_factory=list)
    breaks_seen: list[str] = field(default_factory=list)
    kernels: int | None = None
    largest_fusions: list[str] = field(default_factory=list)
    why_slower: str = ""

    @property
    def speedup(self) -> float | None:
        if self.eager_ms and self.kiln_ms:
            return self.eager_ms / self.kiln_ms
        return None


# ---------------------------------------------------------------------------------------------
# The programs


def _tutorial_function(device: torch.device) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    def foo(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        a = torch.sin(x)
        b = torch.cos(y)
        return a + b

    return foo, lambda: (torch.randn(256, 256, device=device), torch.randn(256, 256, device=device))


class MyModule(nn.Module):
    """The tutorial's module."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(100, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.relu(self.lin(x))


def _tutorial_module(device: torch.device) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    return MyModule().to(device).eval(), lambda: (torch.randn(64, 100, device=device),)


class BasicBlock(nn.Module):
    """ResNet's basic block."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + identity)


class SmallResNet(nn.Module):
    """A ResNet-style classifier: stem, three stages of basic blocks, pooling, a linear head."""

    def __init__(self, width: int = 16, classes: int = 100) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.layers = nn.Sequential(
            BasicBlock(width, width, 1), BasicBlock(width, 2 * width, 2), BasicBlock(2 * width, 4 * width, 2)
        )
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _resnet(device: torch.device) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    batch = 16 if device.type == "cuda" else 8
    return SmallResNet().to(device).eval(), lambda: (torch.randn(batch, 3, 32, 32, device=device),)


def _training_step(
    model: nn.Module, device: torch.device, batch: int, size: int, classes: int
) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    """getting-started's training step: the model is what is compiled; `loss.backward()` (which runs
    the compiled backward) and the optimizer stay outside it. `_model` is the compiled model or, for
    eager, the model itself."""
    loss_fn = nn.CrossEntropyLoss()

    def step(data: torch.Tensor, target: torch.Tensor, _model: nn.Module = model) -> Any:
        loss = loss_fn(_model(data), target)
        loss.backward()
        return loss

    step.model = model  # type: ignore[attr-defined]
    return step, lambda: (
        torch.randn(batch, 3, size, size, device=device),
        torch.randint(classes, (batch,), device=device),
    )


def _resnet_training(device: torch.device) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    torch.manual_seed(0)
    batch = 16 if device.type == "cuda" else 8
    return _training_step(SmallResNet().to(device).train(), device, batch, 32, 100)


def _transformer(device: torch.device) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=128,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    model = BertModel(config).to(device).eval()

    def run(input_ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids).last_hidden_state

    run.model = model  # type: ignore[attr-defined]
    return run, lambda: (torch.randint(0, 1000, (4, 32), device=device),)


class _Skip(Exception):
    """A row that cannot run here (a missing optional package); reported as SKIPPED."""


def _torchvision_resnet18(device: torch.device) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    try:
        from torchvision.models import resnet18
    except ImportError as error:
        raise _Skip("torchvision is not installed") from error
    return resnet18().to(device).eval(), lambda: (torch.randn(16, 3, 224, 224, device=device),)


def _torchvision_resnet18_training(device: torch.device) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    try:
        from torchvision.models import resnet18
    except ImportError as error:
        raise _Skip("torchvision is not installed") from error
    torch.manual_seed(0)
    return _training_step(resnet18().to(device).train(), device, 16, 128, 1000)


ROWS: list[Row] = [
    Row("function: sin+cos", _tutorial_function),
    Row("module: Linear+ReLU", _tutorial_module),
    Row("resnet-style: inference", _resnet),
    Row("resnet-style: training step", _resnet_training, training=True, tolerance=1e-2),
    Row("transformer (BERT config): inference", _transformer, tolerance=1e-3),
    Row("resnet-style: reduce-overhead", _resnet, mode="reduce-overhead", devices=("cuda",)),
    Row("resnet18 (torchvision) b16: inference", _torchvision_resnet18, devices=("cuda",)),
    Row("resnet18 (torchvision) b16: reduce-overhead", _torchvision_resnet18, mode="reduce-overhead", devices=("cuda",)),
    Row(
        "resnet18 (torchvision) b16: training step",
        _torchvision_resnet18_training,
        training=True,
        tolerance=1e-2,
        devices=("cuda",),
    ),
]


# ---------------------------------------------------------------------------------------------
# Measuring


class _Timeout(BaseException):
    """Raised by the row alarm; a BaseException so no `except Exception` inside Kiln swallows it."""


@contextlib.contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise _Timeout(f"row took longer than {seconds}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


FALLBACK_LOGGERS = ("kiln.fallbacks", "aotgrad", "capture")
"""Loggers whose warnings mean some of a row's code ran eagerly; collected per row, not printed."""


class _FallbackCollector(logging.Handler):
    """Keeps the fallback warnings of the current row (instead of printing them)."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"[{record.name}] {record.getMessage()}")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _timed_ms(fn: Callable[[], Any], device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return (time.perf_counter() - start) * 1e3


def _median_ms_interleaved(
    eager: Callable[[], Any], kiln: Callable[[], Any], device: torch.device, iterations: int
) -> tuple[float, float]:
    """Median milliseconds of each, measured alternately so machine load affects both alike.

    Slow programs get fewer iterations (at least 3), so one row's timing stays near 10 seconds.
    """
    slowest = max(_timed_ms(eager, device), _timed_ms(kiln, device))  # also a warm-up
    iterations = max(3, min(iterations, int(TIMING_BUDGET_MS / (2 * max(slowest, 1e-3)))))
    eager_samples, kiln_samples = [], []
    for _ in range(iterations):
        eager_samples.append(_timed_ms(eager, device))
        kiln_samples.append(_timed_ms(kiln, device))
    return statistics.median(eager_samples), statistics.median(kiln_samples)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _relative_error(expected: Any, actual: Any) -> float:
    left, right = _tensors(expected), _tensors(actual)
    if len(left) != len(right):
        return float("inf")
    worst = 0.0
    for a, b in zip(left, right):
        if a.shape != b.shape:
            return float("inf")
        a64, b64 = a.detach().double().cpu(), b.detach().double().cpu()
        scale = max(a64.norm().item(), 1e-12)
        worst = max(worst, (a64 - b64).norm().item() / scale)
    return worst


def _gradients(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros(()) for p in model.parameters()]


def _run_row(frontend: Any, row: Row, device: torch.device, iterations: int) -> Result:
    # Inference rows run without autograd, as a deployment would (and as eager is timed).
    with contextlib.nullcontext() if row.training else torch.no_grad():
        return _run_row_inner(frontend, row, device, iterations)


def _run_row_inner(frontend: Any, row: Row, device: torch.device, iterations: int) -> Result:
    result = Result(row.name, device.type)
    stage = "build"
    try:
        program, make_inputs = row.build(device)
        model: nn.Module | None = getattr(program, "model", None)
        stage = "compile"
        if row.training:
            compiled_model = frontend.compile(model, mode=row.mode)
            compiled = _bind(program, compiled_model)
            context = getattr(compiled_model, "kiln_context", None)
        else:
            compiled = frontend.compile(program, mode=row.mode)
            context = getattr(compiled, "kiln_context", None)
        # Check against eager on fresh inputs (training: the loss and every gradient).
        stage = "first call (compiles)"
        inputs = make_inputs()
        if model is not None and row.training:
            model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        actual = compiled(*inputs)
        _sync(device)
        result.compile_s = time.perf_counter() - start
        actual_grads = _gradients(model) if (model is not None and row.training) else []
        stage = "check against eager"
        if model is not None and row.training:
            model.zero_grad(set_to_none=True)
        expected = program(*inputs)
        expected_grads = _gradients(model) if (model is not None and row.training) else []
        result.max_error = max(
            [_relative_error(expected, actual)]
            + [_relative_error(e, a) for e, a in zip(expected_grads, actual_grads)]
        )
        stage = "timing"
        fresh = make_inputs()
        result.eager_ms, result.kiln_ms = _median_ms_interleaved(
            lambda: program(*fresh), lambda: compiled(*fresh), device, iterations
        )
        if not row.training:  # check again once warmed up (under reduce-overhead: a CUDA graph replay)
            stage = "check after warm-up"
            again = make_inputs()
            result.max_error = max(result.max_error, _relative_error(program(*again), compiled(*again)))
        if context is not None:
            result.graphs = context.graphs_compiled
            result.breaks = context.graph_breaks
            kernels = list(getattr(context, "kernels", []))
            result.kernels = len(kernels)
            largest = sorted(kernels, key=lambda kernel: -kernel.ops)[:3]
            result.largest_fusions = [f"{k.name} ({k.ops} op{'s' if k.ops != 1 else ''})" for k in largest]
        if result.speedup is not None and result.speedup < 1.0:
            stage = "profiling (why slower)"
            result.why_slower = _why_slower(program, compiled, fresh, result, device)
        if result.max_error > row.tolerance:
            result.status = "WRONG"
            result.detail = f"relative error {result.max_error:.2e} > tolerance {row.tolerance:.0e}"
        elif result.graphs == 0:
            result.detail = "nothing was compiled: capture produced no graph, the program ran eagerly"
    except _Timeout as error:
        result.status = "FAILED"
        result.detail = f"{stage}: {error}"
    except _Skip as reason:
        result.status = "SKIPPED"
        result.detail = str(reason)
    except Exception as error:
        result.status = "FAILED"
        message = " ".join(str(error).split())
        result.detail = f"{stage}: {type(error).__name__}: {message[:240]}"
        if "--traceback" in sys.argv:
            traceback.print_exc()
    return result


@dataclass
class _Split:
    """One profiled call: its wall milliseconds, the ATen ops' share, and the two costliest ops."""

    wall_ms: float
    aten_ms: float
    top: list[tuple[str, float]]


def _profiled_call(fn: Callable[[], Any], device: torch.device) -> _Split:
    # Kineto (the profiler's engine) prints a line per start and stop at its default log level.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        wall_ms = _timed_ms(fn, device)
    events = [e for e in prof.key_averages() if e.key.startswith("aten::")]
    aten_ms = sum(e.self_cpu_time_total for e in events) / 1e3
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:2]
    return _Split(wall_ms, aten_ms, [(e.key, e.self_cpu_time_total / 1e3) for e in top])


def _median_split(fn: Callable[[], Any], device: torch.device, calls: int = 3) -> _Split:
    splits = sorted((_profiled_call(fn, device) for _ in range(calls)), key=lambda s: s.wall_ms)
    return splits[len(splits) // 2]


def _why_slower(
    program: Callable[..., Any], compiled: Callable[..., Any], inputs: tuple[Any, ...], result: Result, device: torch.device
) -> str:
    """Why a row is slower than eager: graph breaks and fallbacks, then where each one's time goes
    (ATen ops vs the rest: Kiln's generated kernels, guards and wrapper), from profiled calls."""
    reasons = []
    if result.breaks:
        reasons.append(f"{result.breaks} graph break(s): Python runs between graphs and fusion stops at each")
    if result.fallbacks:
        reasons.append(f"{len(result.fallbacks)} graph(s) ran eagerly (see the fallback line)")
    try:
        kiln = _median_split(lambda: compiled(*inputs), device)
        eager = _median_split(lambda: program(*inputs), device)
    except Exception as error:  # the profiler is an aid: its failure must not fail the row
        reasons.append(f"(profiling failed: {type(error).__name__})")
        return "; ".join(reasons)
    own = max(kiln.wall_ms - kiln.aten_ms, 0.0)
    top = ", ".join(f"{name} {ms:.2f}" for name, ms in kiln.top)
    reasons.append(
        f"profiled, Kiln takes {kiln.wall_ms:.2f} ms a call: {kiln.aten_ms:.2f} ms in ATen calls it keeps ({top}) "
        f"and {own:.2f} ms in its {result.kernels or 0} kernel(s), guards and wrapper; eager takes "
        f"{eager.wall_ms:.2f} ms, {eager.aten_ms:.2f} ms of it in ATen ops"
    )
    if kiln.aten_ms > 1.2 * eager.aten_ms:
        reasons.append(
            f"the ATen calls take longer under Kiln than eager's whole ATen share ({kiln.aten_ms:.2f} vs "
            f"{eager.aten_ms:.2f} ms): compare their arguments' layouts in the KILN_DEBUG wrapper, or rerun on "
            "a quiet machine"
        )
    elif kiln.aten_ms >= 0.5 * kiln.wall_ms:
        reasons.append(
            "most of Kiln's time is in the GEMM/convolution calls eager makes too, so fusing the ops around "
            "them can win only the rest"
        )
    elif own > eager.wall_ms - kiln.aten_ms:
        reasons.append("Kiln's own kernels (and per-call overhead) take longer than eager's kernels for the same ops")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > (os.cpu_count() or 1):
        reasons.append(
            f"the load average is {load:.1f} on {os.cpu_count()} cores: other work shares them, so timings "
            "are noisy (rerun it, or `nox -s bench`)"
        )
    return "; ".join(reasons)


def _bind(program: Callable[..., Any], compiled_model: Callable[..., Any]) -> Callable[..., Any]:
    def run(*inputs: Any) -> Any:
        return program(*inputs, _model=compiled_model)

    return run


# ---------------------------------------------------------------------------------------------
# Reporting


def _fmt(value: float | int | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


WIDTH = 139


def _print_header() -> None:
    print(
        f"{'program':<38} {'device':<6} {'mode':<15} {'status':<7} {'graphs':>6} {'breaks':>6} {'kernels':>7} "
        f"{'compile s':>9} {'eager ms':>9} {'kiln ms':>9} {'speedup':>8} {'rel err':>8}"
    )
    print("-" * WIDTH)


def _print_result(result: Result, mode: str | None) -> None:
    speedup = f"{result.speedup:.2f}x" if result.speedup else "-"
    print(
        f"{result.row:<38} {result.device:<6} {mode or 'default':<15} {result.status:<7} "
        f"{_fmt(result.graphs, 'd'):>6} {_fmt(result.breaks, 'd'):>6} {_fmt(result.kernels, 'd'):>7} "
        f"{_fmt(result.compile_s, '.2f'):>9} "
        f"{_fmt(result.eager_ms, '.3f'):>9} {_fmt(result.kiln_ms, '.3f'):>9} {speedup:>8} "
        f"{_fmt(result.max_error, '.1e'):>8}",
        flush=True,
    )
    if result.detail:
        print(f"    -> {result.detail}", flush=True)
    if result.largest_fusions:
        print(f"    -> largest fusions: {', '.join(result.largest_fusions)}", flush=True)
    for index, seen in enumerate(result.breaks_seen[:3], 1):
        print(f"    -> graph break {index}: {seen[:300]}", flush=True)
    if len(result.breaks_seen) > 3:
        print(f"    -> ... and {len(result.breaks_seen) - 3} more graph break(s)", flush=True)
    if result.why_slower:
        print(f"    -> slower than eager: {result.why_slower}", flush=True)
    if result.fallbacks:
        print(f"    -> {len(result.fallbacks)} fallback(s) to eager; first: {result.fallbacks[0][:300]}", flush=True)


NEXT_STEPS = """
Where to look next:
  KILN_DEBUG=1 python tools/demo.py --row resnet   per compiled graph, a folder (path printed) with the captured
                                                   FX graph, the ATen forward/backward graphs, the IR, every
                                                   generated kernel and the wrapper that calls them
  KILN_LOGS=graph_breaks,recompiles,fallbacks      those events logged as they happen, with your line
  frontend.explain(fn, *args)                      graphs, ops and the reason and line of every graph break
  frontend.compile_times(), CompileProfiler        the compile report: seconds per stage; graphs, recompiles
  nox -s bench  (nox -s bench -- --quick)          eager vs torch.compile vs Kiln, side by side
  docs/troubleshooting.md, docs/benchmarks.md"""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer timing iterations")
    parser.add_argument("--strict", action="store_true", help="exit 1 if any row fails or is wrong")
    parser.add_argument("--device", choices=("cpu", "cuda", "all"), default="all")
    parser.add_argument("--row", action="append", help="run only rows whose name contains this")
    parser.add_argument("--traceback", action="store_true", help="print tracebacks of failing rows")
    args = parser.parse_args(argv)

    devices = [torch.device("cpu")]
    if torch.cuda.is_available():
        devices.append(torch.device("cuda"))
    if args.device != "all":
        devices = [d for d in devices if d.type == args.device]
    # Full float32 on the GPU for eager and Kiln alike: with TF32 convolutions and matmuls, eager's
    # own rounding differs from run to run by more than the tolerances, and the check would measure
    # TF32 instead of the compiler.
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"Kiln demo: torch {torch.__version__}, {torch.get_num_threads()} CPU thread(s)", end="")
    print(f", GPU: {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ", no GPU")
    try:
        import frontend
    except Exception as error:
        print(f"cannot import frontend ({type(error).__name__}: {error}); is Kiln installed? (nox -s demo)")
        return 1 if args.strict else 0

    collector = _FallbackCollector()
    for name in FALLBACK_LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(collector)
        logger.propagate = False
    breaks = _FallbackCollector()
    logging.getLogger("kiln.graph_breaks").addHandler(breaks)
    logging.getLogger("kiln.graph_breaks").propagate = False
    try:
        frontend.config.logs = frontend.config.logs | {"graph_breaks"}
    except Exception as error:
        print(f"(cannot log graph breaks: {type(error).__name__}: {error})")
    iterations = 5 if args.quick else 20
    started = time.perf_counter()
    results: list[Result] = []
    stage_totals: dict[str, float] = {}
    reset_failed = False
    _print_header()
    for device in devices:
        device_started = time.perf_counter()
        for row in ROWS:
            if device.type not in row.devices or (args.row and not any(s in row.name for s in args.row)):
                continue
            if time.perf_counter() - device_started > TOTAL_TIME_LIMIT_S:
                skipped = Result(row.name, device.type, "SKIPPED", f"the demo's {TOTAL_TIME_LIMIT_S}s budget for {device.type} is spent")
                results.append(skipped)
                _print_result(skipped, row.mode)
                continue
            collector.messages.clear()
            breaks.messages.clear()
            try:
                frontend.reset()
            except Exception as error:
                if not reset_failed:
                    print(f"    (frontend.reset() failed: {type(error).__name__}: {error})")
                reset_failed = True
            limit = int(min(ROW_TIME_LIMIT_S, max(10.0, TOTAL_TIME_LIMIT_S + 30 - (time.perf_counter() - device_started))))
            with _time_limit(limit):
                result = _run_row(frontend, row, device, iterations)
            result.fallbacks = list(collector.messages)
            result.breaks_seen = [" ".join(m.split("] ", 1)[-1].split()) for m in breaks.messages]
            results.append(result)
            try:
                for stage, seconds in frontend.compile_times(repr="dict").items():
                    stage_totals[stage] = stage_totals.get(stage, 0.0) + seconds
            except Exception:
                pass
            _print_result(result, row.mode)
    print("-" * WIDTH)
    ok = sum(r.status == "ok" for r in results)
    print(f"{ok}/{len(results)} rows ok in {time.perf_counter() - started:.1f}s")
    if stage_totals:
        print("compile seconds per stage, all rows: " + ", ".join(f"{k} {v:.2f}" for k, v in stage_totals.items()))
    print(NEXT_STEPS)
    failed = ok != len(results)
    return 1 if (args.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
