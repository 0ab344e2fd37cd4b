"""`CompileProfiler`: a backend that records every graph and recompilation, and reports them.

As in the FAQ::

    with frontend.CompileProfiler() as prof:
        profiled = frontend.compile(my_model, backend=prof)
        profiled(x)
    print(prof.report())

It compiles nothing (graphs run eagerly). `frontend.compile` sees that the backend has an
``on_capture_event`` method and sends it capture's events: graphs (with their guards), graph
breaks (with the user's line), and recompilations with the guard that failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from frontend.capture_events import CaptureEvent


@dataclass(frozen=True)
class GraphRecord:
    """One graph the profiler was given: where it came from and its size."""

    location: str
    ops: int
    inputs: int


@dataclass
class CompileProfiler:
    """A backend recording graphs, graph breaks and recompilations (with the failed guard).

    Use it as ``backend=prof`` inside ``with prof:``; `report()` returns the summary.
    """

    graphs: list[GraphRecord] = field(default_factory=list)
    recompilations: list[CaptureEvent] = field(default_factory=list)
    graph_breaks: list[CaptureEvent] = field(default_factory=list)
    active: bool = False
    _pending_ops: list[tuple[int, int]] = field(default_factory=list, repr=False)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        ops = sum(1 for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module"))
        self._pending_ops.append((ops, len(example_inputs)))
        return gm.forward

    def on_capture_event(self, event: CaptureEvent) -> None:
        """Record one capture event (called by `frontend.compile` when this is the backend)."""
        if event.kind == "recompile":
            self.recompilations.append(event)
        elif event.kind == "graph_break":
            self.graph_breaks.append(event)
        elif event.kind == "graph":
            ops, inputs = self._pending_ops.pop(0) if self._pending_ops else (0, 0)
            where = f"{event.function} ({event.location})" if event.function else event.location
            self.graphs.append(GraphRecord(where, ops, inputs))

    def __enter__(self) -> CompileProfiler:
        self.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.active = False
        for ops, inputs in self._pending_ops:  # graphs capture did not report an event for
            self.graphs.append(GraphRecord("graph", ops, inputs))
        self._pending_ops.clear()

    def report(self) -> str:
        """A readable summary: graphs, graph breaks, and each recompilation with its failed guard."""
        graphs = self.graphs + [GraphRecord("graph", ops, inputs) for ops, inputs in self._pending_ops]
        lines = [
            "Kiln CompileProfiler report",
            f"  graphs compiled: {len(graphs)} ({sum(g.ops for g in graphs)} ops)",
            f"  graph breaks: {len(self.graph_breaks)}",
            f"  recompilations: {len(self.recompilations)}",
        ]
        for graph in graphs:
            lines.append(f"  graph: {graph.location}: {graph.ops} ops, {graph.inputs} inputs")
        for index, event in enumerate(self.graph_breaks, 1):
            lines.append(f"  break {index}. {event.describe()}")
        for index, event in enumerate(self.recompilations, 1):
            # describe(): the failed guard, its value on the call, and the line that installed it.
            lines.append(f"  recompile {index}. {event.describe()}")
        if self.recompilations:
            lines.append(
                "  Each recompilation above names the guard that failed, its value on that call, and the line "
                "of your code that installed it; keep that value stable between calls, or for changing sizes "
                "compile with dynamic=True (or frontend.mark_dynamic(tensor, dim)) to get one graph for all sizes."
            )
        elif not graphs:
            lines.append("  No graphs were compiled: was the profiler passed as backend= and the function called?")
        return "\n".join(lines)
