"""Capture's events (graphs, graph breaks, recompilations) for stats, KILN_LOGS and the profiler.

Capture reports what it does through a `capture.CaptureHooks` passed to ``capture.optimize``.
`build_capture_hooks` makes one per `frontend.compile` call that charges capture's seconds to
`compile_times()`, logs the KILN_LOGS events with the user's source lines, writes guards into the
KILN_DEBUG folder, and forwards every event, as a `CaptureEvent`, to extra listeners such as
`CompileProfiler`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import capture
from frontend.context import CompileContext

Listener = Callable[["CaptureEvent"], None]


@dataclass(frozen=True)
class CaptureEvent:
    """One event from capture.

    Attributes:
        kind: "graph" (a graph was compiled), "graph_break" or "recompile".
        message: what happened: the break reason, the guard that failed, or a graph summary.
        location: the user's code: ``file:line`` and, when known, the line's text.
        function: the user function (or resume function) name.
        guards: for "graph", the guards of the new cache entry.
    """

    kind: str
    message: str
    location: str = ""
    function: str = ""
    guards: tuple[str, ...] = ()

    def describe(self) -> str:
        """One readable line, plus the location on a second line when known."""
        where = f"\n      at {self.location}" if self.location else ""
        name = f"{self.function}: " if self.function else ""
        return f"{name}{self.message}{where}"


def _where(filename: str, lineno: int, text: str = "") -> str:
    return f"{filename}:{lineno}" + (f": {text}" if text else "")


def adapt_event(raw: capture.GraphCompiled | capture.Recompiled | capture.GraphBroken) -> CaptureEvent:
    """A capture event (GraphCompiled, Recompiled, GraphBroken) as a `CaptureEvent`."""
    if isinstance(raw, capture.GraphCompiled):
        nodes = raw.graph_module.graph.nodes
        ops = sum(1 for node in nodes if node.op in ("call_function", "call_method", "call_module"))
        return CaptureEvent(
            "graph",
            f"graph with {ops} ops and {len(raw.guards)} guards",
            _where(raw.filename, raw.firstlineno),
            raw.code_name,
            tuple(raw.guards),
        )
    if isinstance(raw, capture.Recompiled):
        # The location is the user's line that installed the failing guard (e.g. the line whose
        # code relied on a size), falling back to the function's definition.
        where = raw.guard.where() if raw.guard is not None else ""
        values = raw.failing_values
        return CaptureEvent(
            "recompile",
            f"recompiling (cache entry {raw.cache_size}) because this guard failed: {raw.failed_guard}"
            + (f"; on this call {values}" if values else ""),
            where or _where(raw.filename, raw.firstlineno),
            raw.code_name,
        )
    if isinstance(raw, capture.GraphBroken):
        reason = raw.reason
        location = reason.location
        where = _where(location.filename, location.lineno, location.source_line) if location is not None else ""
        return CaptureEvent("graph_break", reason.reason, where, raw.code_name)
    return CaptureEvent(type(raw).__name__, str(raw))


def _log(context: CompileContext, event: CaptureEvent) -> None:
    if event.kind == "graph_break":
        context.events.emit("graph_breaks", f"graph break: {event.describe()}")
    elif event.kind == "recompile":
        context.events.emit("recompiles", event.describe())
    elif event.kind == "graph" and context.events.wants("guards"):
        guards = "\n".join(f"    {guard}" for guard in event.guards) or "    (none)"
        context.events.emit("guards", f"{event.function} ({event.location}) guards:\n{guards}")


def build_capture_hooks(context: CompileContext, listeners: Sequence[Listener] = ()) -> capture.CaptureHooks:
    """A `capture.CaptureHooks` wired to `context` and `listeners`."""
    hooks = capture.CaptureHooks()

    def forward(raw: capture.GraphCompiled | capture.Recompiled | capture.GraphBroken) -> None:
        event = adapt_event(raw)
        if event.kind == "graph_break":
            context.graph_breaks += 1
        elif event.kind == "recompile":
            context.recompilations += 1
        _log(context, event)
        if context.report is not None:
            context.report.on_capture_event(context, event)
        for listener in listeners:
            listener(event)

    def on_graph(raw: capture.GraphCompiled) -> None:
        context.times.add("capture", raw.capture_seconds)
        artifacts = context.artifacts
        if artifacts is not None:
            artifacts.write("guards.txt", "\n".join(raw.guards) + "\n")
            artifacts.add_timing("capture", raw.capture_seconds)
        if context.report is not None:
            context.report.add_capture_seconds(context, raw.capture_seconds)
        forward(raw)

    hooks.on_graph.append(on_graph)
    hooks.on_recompile.append(forward)
    hooks.on_graph_break.append(forward)
    return hooks
