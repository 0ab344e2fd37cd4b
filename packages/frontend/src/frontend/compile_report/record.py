"""What the compile report records: per compiled function its graphs, breaks and recompilations.

One `ProcessReport` per process (`PROCESS_REPORT`), active once KILN_REPORT, ``config.report`` or
`frontend.report` asks for it. It reuses the plumbing every compile already has: each graph's
`GraphArtifacts` (kept in memory), capture's events (as `CaptureEvent`s), the KILN_LOGS events
(through the event log's sink) and the stage timer (`CompileTimes`, read before and after).
"""

from __future__ import annotations

import atexit
import datetime
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from frontend.capture_events import CaptureEvent
from frontend.debug import GraphArtifacts

if TYPE_CHECKING:
    from frontend.context import CompileContext


@dataclass
class GraphEntry:
    """One graph handed to a backend, and what became of it.

    Attributes:
        number: its number among its function's graphs (1, 2, ...).
        backend: the backend's name.
        ops: how many operations the captured graph has.
        frame: the user function (or resume function) and its ``file:line``, from capture.
        guards: the guards of its cache entry.
        files: the artifacts by name (fx_graph.py, aten_forward.py, forward/ir.txt, kernels, ...).
        seconds: seconds per stage spent on it (capture from capture's own measurement).
        kernels: (name, device, fused ATen ops) of each kernel generated for it.
        libraries, cache_hits: compiled libraries asked for, and how many came from the cache.
        graph_cache: per stage, graph-cache hits and misses while it compiled (see `frontend.graph_cache`).
        fallbacks: messages of the parts of it that run eagerly.
        error: what the backend raised, if it did.
    """

    number: int
    backend: str
    ops: int
    frame: str = ""
    guards: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    kernels: list[tuple[str, str, int]] = field(default_factory=list)
    libraries: int = 0
    cache_hits: int = 0
    graph_cache: dict[str, tuple[int, int]] = field(default_factory=dict)
    fallbacks: list[str] = field(default_factory=list)
    error: str = ""


@dataclass
class FunctionEntry:
    """One `frontend.compile` call: its graphs, graph breaks, recompilations and other messages."""

    label: str
    graphs: list[GraphEntry] = field(default_factory=list)
    breaks: list[CaptureEvent] = field(default_factory=list)
    recompiles: list[CaptureEvent] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)


@dataclass
class _Open:
    """A graph being compiled: its entry and the counters read when it started."""

    entry: GraphEntry
    artifacts: GraphArtifacts | None
    seconds: dict[str, float]
    kernels: int
    cache: tuple[int, int]
    graph_cache: dict[str, tuple[int, int]]
    started: float


class ProcessReport:
    """Every compile of this process, for the HTML report (see `frontend.report`)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.active = False
        self.started = datetime.datetime.now()
        self.functions: dict[int, FunctionEntry] = {}
        self._open: dict[int, _Open] = {}
        self._exit_hook = False

    def activate(self, path: str | Path) -> None:
        """Record from now on; the report goes to `path` at process exit (and on `write`)."""
        self.path = Path(path).expanduser()
        self.active = True
        if not self._exit_hook:
            atexit.register(self._write_at_exit)
            self._exit_hook = True

    def function(self, context: CompileContext) -> FunctionEntry:
        """The entry of the compiled function `context` belongs to."""
        key = id(context)
        if key not in self.functions:
            self.functions[key] = FunctionEntry(context.label)
        return self.functions[key]

    def begin_graph(self, context: CompileContext, gm: torch.fx.GraphModule, backend: str) -> None:
        """A captured graph goes to its backend (call after `context.new_artifacts()`)."""
        entry = GraphEntry(
            number=context.graphs_compiled,
            backend=backend,
            ops=sum(1 for node in gm.graph.nodes if node.op.startswith("call_")),
        )
        self.function(context).graphs.append(entry)
        self._open[id(context)] = _Open(
            entry, context.artifacts, dict(context.times.seconds), len(context.kernels), (context.cache[0], context.cache[1]),
            _graph_cache_counts(context), time.perf_counter(),
        )

    def end_graph(self, context: CompileContext, error: BaseException | None = None) -> None:
        """The backend is done with the graph begun last (`error` if it raised)."""
        opened = self._open.pop(id(context), None)
        if opened is None:
            return
        entry = opened.entry
        for stage, seconds in context.times.seconds.items():
            spent = seconds - opened.seconds.get(stage, 0.0)
            if spent > 1e-6:
                entry.seconds[stage] = spent
        entry.kernels = [(k.name, k.device, k.ops) for k in context.kernels[opened.kernels :]]
        entry.libraries = context.cache[0] - opened.cache[0]
        entry.cache_hits = context.cache[1] - opened.cache[1]
        for stage, (hits, misses) in _graph_cache_counts(context).items():
            old_hits, old_misses = opened.graph_cache.get(stage, (0, 0))
            if (hits, misses) != (old_hits, old_misses):
                entry.graph_cache[stage] = (hits - old_hits, misses - old_misses)
        if opened.artifacts is not None and opened.artifacts.files is not None:
            entry.files = opened.artifacts.files  # the same dict: graphs compiled later (backward) still land
        if error is not None:
            entry.error = f"{type(error).__name__}: {error}"

    def on_capture_event(self, context: CompileContext, event: CaptureEvent) -> None:
        """Record a capture event: a graph's frame and guards, a graph break, a recompilation."""
        function = self.function(context)
        if event.kind == "graph":
            pending = [g for g in function.graphs if not g.frame]
            if pending:
                graph = pending[-1]
                graph.frame = f"{event.function} ({event.location})"
                graph.guards = event.guards
        elif event.kind == "graph_break":
            function.breaks.append(event)
        elif event.kind == "recompile":
            function.recompiles.append(event)

    def add_capture_seconds(self, context: CompileContext, seconds: float) -> None:
        """Charge capture's own seconds to the function's latest graph."""
        graphs = self.function(context).graphs
        if graphs:
            graphs[-1].seconds["capture"] = graphs[-1].seconds.get("capture", 0.0) + seconds

    def event_sink(self, context: CompileContext) -> Any:
        """The event-log sink of `context`: fallbacks and repro messages go to its graph (or function)."""

        def sink(event: str, message: str) -> None:
            if event not in ("fallbacks", "repro"):
                return
            function = self.function(context)
            opened = self._open.get(id(context))
            graph = opened.entry if opened is not None else (function.graphs[-1] if function.graphs else None)
            if event == "fallbacks" and graph is not None:
                graph.fallbacks.append(message)
            else:
                function.messages.append(message)

        return sink

    def write(self, path: str | Path | None = None) -> Path:
        """Write the report (to `path`, default the activated one) and return its path."""
        from frontend.compile_report.html import render

        target = Path(path).expanduser() if path is not None else self.path
        if target is None:
            raise ValueError("no report path: pass one, or set KILN_REPORT / config.report")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(self), encoding="utf-8")
        return target

    def _write_at_exit(self) -> None:
        if self.active and self.path is not None:
            try:
                path = self.write()
                print(f"[kiln] compile report: {path}", file=sys.stderr)
            except Exception as error:  # at exit there is no caller to raise to
                print(f"[kiln] could not write the compile report: {error}", file=sys.stderr)

    def title(self) -> str:
        """The report's title line."""
        return f"Kiln compile report: pid {os.getpid()}, started {self.started:%Y-%m-%d %H:%M:%S}"


def _graph_cache_counts(context: CompileContext) -> dict[str, tuple[int, int]]:
    """The graph cache's (hits, misses) per stage so far, as the stage timer counts them."""
    counts = getattr(context.times, "cache", None) or {}
    return {stage: (int(pair[0]), int(pair[1])) for stage, pair in counts.items()}


PROCESS_REPORT = ProcessReport()
"""The process's compile report (compiles are per process, so is their report)."""
