"""Measure one model under one compiler: four calls, each checked against eager.

The calls: the same input twice, new values of the same shape, then a new shape (sequence length,
image size or batch, see `tools.zoo.inputs`). For each call the record says how many graphs exist
so far, which graph breaks and recompilations happened during it (with reasons and the user's
lines), whether any compiled graph ran (a call served entirely by eager fallback ran none), whether
the outputs match eager's, and how long it took.

Compilers: "kiln" (`frontend.compile` with a counting backend that runs each graph as captured),
"dynamo" (`torch.compile` with the same counting backend, the reference; this tool is not part of
any package, so it may call torch's compiler) and "kiln-default" (`frontend.compile(model)`, Kiln's
own kernels, checked for correctness only).
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from tools.zoo.compare import compare_outputs

CALLS = (("base", 0), ("base", 0), ("base", 1), ("new", 2))
"""(input variant, seed offset) of each call: same input twice, new values, new shape."""

SAME_SHAPE_CALLS = (1, 2)
"""Calls whose inputs have the shapes of an earlier call: a recompile there is a storm."""


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

    @property
    def one_graph(self) -> bool:
        """One graph and no graph break on the first call."""
        return not self.error and self.first_call_graphs == 1 and self.first_call_breaks == 0

    @property
    def storm(self) -> bool:
        """A recompile on a call with already-seen shapes, or a call that ran no compiled graph."""
        if self.error:
            return False
        return any(c.recompiles for c in self.calls if c.index in SAME_SHAPE_CALLS) or any(
            c.graph_runs == 0 for c in self.calls)

    @property
    def correct(self) -> bool:
        """Every call ran and matched eager."""
        return not self.error and len(self.calls) == len(CALLS) and all(c.correct for c in self.calls)

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
    """Counts graphs and ops at compile time and graph runs at run time; runs each graph as captured."""

    def __init__(self) -> None:
        self.graphs = 0
        self.ops = 0
        self.runs = 0
        self.events: list[Any] = []  # Kiln's CaptureEvents (graph breaks, recompiles), in order
        self.__name__ = "zoo_counter"

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs += 1
        self.ops += sum(1 for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module"))
        forward = gm.forward

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
    if compiler == "kiln-default":
        return frontend.compile(model, options={"fallback_to_eager": False})
    return frontend.compile(model, backend=backend)


def measure(compiler: str, model: torch.nn.Module, calls: list[dict[str, Any]], expected: list[Any],
            tolerance: float) -> CompilerResult:
    """Run `model` compiled by `compiler` on each of `calls` (keyword arguments) against `expected`."""
    result = CompilerResult(compiler)
    backend = CountingBackend()
    try:
        compiled = _compile(compiler, model, backend)
    except Exception as error:  # the compiler refused the model outright
        result.error = f"{type(error).__name__}: {error}"[:2000]
        return result
    probe: _KilnProbe | _DynamoProbe = _DynamoProbe() if compiler == "dynamo" else _KilnProbe(backend)
    for index, (kwargs, reference) in enumerate(zip(calls, expected, strict=True)):
        record = CallRecord(index, CALLS[index][0])
        graphs_before, runs_before = backend.graphs, backend.runs
        started = time.perf_counter()
        try:
            with torch.no_grad():
                output = compiled(**kwargs)
            record.seconds = time.perf_counter() - started
            record.correct, record.max_error = compare_outputs(output, reference, tolerance)
        except Exception as error:
            record.seconds = time.perf_counter() - started
            record.error = _error_text(error)
        probe.take(record)
        record.graphs_so_far = backend.graphs
        record.new_graphs = backend.graphs - graphs_before
        record.graph_runs = backend.runs - runs_before
        if compiler == "kiln-default":
            record.graph_runs = max(record.graph_runs, 1)  # Kiln's kernels do not report runs
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
