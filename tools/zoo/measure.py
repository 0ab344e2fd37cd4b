"""Measure one model under one compiler: four calls, each checked against eager.

The calls: the same input twice, new values of the same shape, then a new shape (sequence length,
image size or batch, see `tools.zoo.inputs`); in training mode three steps (`tools.zoo.modes`). For each call the record says how many graphs exist
so far, which graph breaks and recompilations happened during it (with reasons and the user's
lines), whether any compiled graph ran (a call served entirely by eager fallback ran none), whether
the outputs match eager's, and how long it took.

Compilers: "kiln" (`frontend.compile` with a counting backend that runs each graph as captured),
"kiln-aot" (the counting backend in front of the "aot_eager" backend: capture and aotgrad),
"kiln-default" (the counting backend in front of the default "inductor" backend, Kiln's own
kernels, with ``fallback_to_eager=False``) and "dynamo" (`torch.compile` with the same counting
backend, the reference; this tool is not part of any package, so it may call torch's compiler).
The three Kiln compilers are the triage ladder: capture alone, + aotgrad, + kernels.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from tools.zoo.compare import judge
from tools.zoo.modes import INFER_CALLS, Mode
from tools.zoo.training import restore, train_call

CALLS = INFER_CALLS
"""(input variant, seed offset) of each inference call: same input twice, new values, new shape."""

SAME_SHAPE_CALLS = Mode().same_shape_calls
"""Calls whose inputs have the shapes of an earlier call: a recompile there is a storm."""

KILN_BACKENDS = {"kiln": None, "kiln-aot": "aot_eager", "kiln-default": "inductor"}
"""Kiln compiler -> the frontend backend the counting backend hands each graph to (None: run it as captured)."""


@dataclass
class Break:
    """One graph break: the reason and the user's line (``path:line: text``, shortened)."""

    reason: str
    where: str = ""


@dataclass
class CallRecord:
    """What happened during one call."""

    index: int
    variant: str
    graphs_so_far: int = 0
    new_graphs: int = 0
    breaks: list[Break] = field(default_factory=list)
    recompiles: list[str] = field(default_factory=list)
    graph_runs: int = 0
    correct: bool = False
    max_error: float = 0.0
    seconds: float = 0.0
    error: str = ""
    wrong_at: str = ""


@dataclass
class CompilerResult:
    """One model under one compiler: the per-call records and the verdicts the report counts."""

    compiler: str
    calls: list[CallRecord] = field(default_factory=list)
    graphs: int = 0
    ops: int = 0
    first_call_graphs: int = 0
    first_call_breaks: int = 0
    first_call_ops: int = 0
    error: str = ""
    planned: int = len(CALLS)
    same_shape: tuple[int, ...] = SAME_SHAPE_CALLS

    @property
    def one_graph(self) -> bool:
        """One graph and no graph break on the first call."""
        return not self.error and self.first_call_graphs == 1 and self.first_call_breaks == 0

    @property
    def storm(self) -> bool:
        """A recompile on a call with already-seen shapes, or a call that ran no compiled graph."""
        if self.error:
            return False
        return any(c.recompiles for c in self.calls if c.index in self.same_shape) or any(
            c.graph_runs == 0 for c in self.calls)

    @property
    def correct(self) -> bool:
        """Every call ran and matched eager."""
        return not self.error and len(self.calls) == self.planned and all(c.correct for c in self.calls)

    @property
    def breaks(self) -> int:
        """Graph breaks over all four calls."""
        return sum(len(c.breaks) for c in self.calls)

    @property
    def recompiles(self) -> int:
        """Recompilations over all four calls."""
        return sum(len(c.recompiles) for c in self.calls)

    def to_json(self) -> dict[str, Any]:
        """Plain data, the verdicts included."""
        data = asdict(self)
        data.update(one_graph=self.one_graph, storm=self.storm, correct=self.correct, breaks=self.breaks,
                    recompiles=self.recompiles)
        return data


class CountingBackend:
    """Counts graphs and ops at compile time and graph runs at run time.

    Each graph runs as captured, or, with `inner` (a frontend backend name: "aot_eager",
    "inductor"), as that backend compiles it: frontend passes the `CompileContext` because
    `__call__` takes one.
    """

    def __init__(self, inner: str | None = None) -> None:
        self.inner = inner
        self.graphs = 0
        self.ops = 0
        self.runs = 0
        self.events: list[Any] = []  # Kiln's CaptureEvents (graph breaks, recompiles), in order
        self.__name__ = "zoo_counter"

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any], context: Any = None) -> Callable[..., Any]:
        self.graphs += 1
        self.ops += sum(1 for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module"))
        forward = gm.forward
        if self.inner is not None:
            from frontend.backends import lookup_backend

            forward = lookup_backend(self.inner)(gm, example_inputs, context)

        def run(*args: Any) -> Any:
            self.runs += 1
            return forward(*args)

        return run

    def on_capture_event(self, event: Any) -> None:
        """frontend forwards capture's events (graph, graph_break, recompile) to this listener."""
        self.events.append(event)


def short_path(location: str) -> str:
    """A user location with site-packages and the repository root cut off."""
    for marker in ("site-packages/", "/work/main/"):
        if marker in location:
            return location.split(marker, 1)[1]
    return location


class _KilnProbe:
    """Reads graph breaks and recompilations of one call from a `CountingBackend`'s events."""

    def __init__(self, backend: CountingBackend) -> None:
        self.backend = backend
        self.seen = 0

    def take(self, record: CallRecord) -> None:
        events, self.seen = self.backend.events[self.seen:], len(self.backend.events)
        for event in events:
            if event.kind == "graph_break":
                record.breaks.append(Break(event.message.splitlines()[0][:400], short_path(event.location)))
            elif event.kind == "recompile":
                where = f" (guard from {short_path(event.location)})" if event.location else ""
                record.recompiles.append(f"{event.function}: {event.message[:400]}{where}")


class _DynamoProbe:
    """Reads graph breaks and recompilations of one call from Dynamo's counters."""

    def __init__(self) -> None:
        from torch._dynamo.utils import counters, guard_failures

        self.counters = counters
        self.guard_failures = guard_failures
        self.breaks: dict[str, int] = {}
        self.failures: dict[Any, int] = {}

    def take(self, record: CallRecord) -> None:
        for reason, count in list(self.counters["graph_break"].items()):
            for _ in range(count - self.breaks.get(reason, 0)):
                record.breaks.append(Break(str(reason).splitlines()[0][:400]))
            self.breaks[reason] = count
        for code, reasons in list(self.guard_failures.items()):
            for reason in reasons[self.failures.get(code, 0):]:
                name = getattr(code, "co_name", str(code))
                record.recompiles.append(f"{name}: {str(reason).splitlines()[0][:400]}")
            self.failures[code] = len(reasons)


def _compile(compiler: str, model: torch.nn.Module, backend: CountingBackend) -> Any:
    if compiler == "dynamo":
        import torch._dynamo

        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        torch._dynamo.utils.guard_failures.clear()
        return torch.compile(model, backend=backend)
    import frontend

    frontend.reset()
    options = {"fallback_to_eager": False} if backend.inner else None
    return frontend.compile(model, backend=backend, options=options)


def measure(compiler: str, model: torch.nn.Module, calls: list[dict[str, Any]], expected: list[Any],
            tolerance: float, mode: Mode | None = None, references: list[Any] | None = None,
            states: list[dict[str, torch.Tensor]] | None = None) -> CompilerResult:
    """Run `model` compiled by `compiler` on each of `calls` (keyword arguments) against `expected`.

    `references`: a float64 eager run's results per call (borderline differences are judged
    against them); `states`: in training mode, eager's parameters and buffers before each call.
    """
    mode = mode or Mode()
    result = CompilerResult(compiler, planned=len(mode.calls), same_shape=mode.same_shape_calls)
    backend = CountingBackend(KILN_BACKENDS.get(compiler))
    try:
        compiled = _compile(compiler, model, backend)
    except Exception as error:  # the compiler refused the model outright
        result.error = f"{type(error).__name__}: {error}"[:2000]
        return result
    probe: _KilnProbe | _DynamoProbe = _DynamoProbe() if compiler == "dynamo" else _KilnProbe(backend)
    for index, (kwargs, reference) in enumerate(zip(calls, expected, strict=True)):
        record = CallRecord(index, mode.calls[index][0])
        graphs_before, runs_before = backend.graphs, backend.runs
        started = time.perf_counter()
        try:
            if mode.task == "train":
                assert states is not None
                restore(model, states[index])
                output = train_call(compiled, model, kwargs, index, mode)
            else:
                with torch.no_grad(), mode.autocast_context():
                    output = compiled(**kwargs)
            record.seconds = time.perf_counter() - started
            ref = references[index] if references is not None else None
            record.correct, record.max_error, record.wrong_at = judge(output, reference, ref, tolerance,
                                                                      mode.low_precision)
        except Exception as error:
            record.seconds = time.perf_counter() - started
            record.error = _error_text(error)
        probe.take(record)
        record.graphs_so_far = backend.graphs
        record.new_graphs = backend.graphs - graphs_before
        record.graph_runs = backend.runs - runs_before
        result.calls.append(record)
        if index == 0:
            result.first_call_graphs, result.first_call_ops = backend.graphs, backend.ops
            result.first_call_breaks = len(record.breaks)
        if record.error:
            result.error = f"call {index + 1}: {record.error}"
            break
    result.graphs, result.ops = backend.graphs, backend.ops
    return result


def _error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if os.environ.get("KILN_ZOO_TRACEBACKS"):
        text += "\n" + traceback.format_exc()
    return text[:3000]
