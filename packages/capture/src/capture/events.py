"""Observation hooks: what `frontend` uses to build compile_times(), profilers and logs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from capture.errors import BreakReason, UserLocation
from capture.guards import Guard


@dataclass(frozen=True)
class GraphCompiled:
    """One graph handed to the backend.

    Attributes:
        code_name: the function (or resume function) the graph came from.
        filename, firstlineno: where that function is defined.
        graph_module: the captured torch-level graph.
        example_inputs: the real tensors of the call that triggered the compile.
        guards: descriptions of the guards of the new cache entry.
        capture_seconds: time spent interpreting bytecode; backend_seconds: time in the backend.
    """

    code_name: str
    filename: str
    firstlineno: int
    graph_module: torch.fx.GraphModule
    example_inputs: list[torch.Tensor]
    guards: tuple[str, ...]
    capture_seconds: float
    backend_seconds: float


@dataclass(frozen=True)
class Recompiled:
    """A code object compiled again because no cached entry's guards passed.

    Attributes:
        code_name, filename, firstlineno: the function recompiled.
        failed_guard: the guard of the latest entry that failed (readable text).
        cache_size: how many entries the function had.
        guard: that guard (None when none could be named).
        failing_values: what the guard's values are on this call, e.g. ``L[0].size(0) = 3``.
        guard_location: the user's line that installed the guard (see `Guard.where`).
    """

    code_name: str
    filename: str
    firstlineno: int
    failed_guard: str
    cache_size: int
    guard: Guard | None = None
    failing_values: str = ""
    guard_location: UserLocation | None = None

    def describe(self) -> str:
        """One readable paragraph: the guard, the value now, and the line that installed the guard."""
        text = f"{self.code_name}: guard failed: {self.failed_guard}"
        if self.failing_values:
            text += f"; now {self.failing_values}"
        if self.guard is not None and self.guard.where():
            text += f"\n  guard installed at {self.guard.where()}"
        return text


@dataclass(frozen=True)
class GraphBroken:
    """A graph break happened while capturing `code_name`."""

    code_name: str
    reason: BreakReason


@dataclass
class CaptureHooks:
    """Callbacks called as capture works; pass one to `optimize(..., hooks=...)`.

    Every list may hold any number of callables; they are called in order. Example::

        hooks = CaptureHooks()
        hooks.on_graph.append(lambda event: print(event.graph_module.graph))
    """

    on_graph: list[Callable[[GraphCompiled], None]] = field(default_factory=list)
    on_recompile: list[Callable[[Recompiled], None]] = field(default_factory=list)
    on_graph_break: list[Callable[[GraphBroken], None]] = field(default_factory=list)

    def graph(self, event: GraphCompiled) -> None:
        """Report a compiled graph to every `on_graph` callback."""
        for callback in self.on_graph:
            callback(event)

    def recompile(self, event: Recompiled) -> None:
        """Report a recompilation to every `on_recompile` callback."""
        for callback in self.on_recompile:
            callback(event)

    def graph_break(self, event: GraphBroken) -> None:
        """Report a graph break to every `on_graph_break` callback."""
        for callback in self.on_graph_break:
            callback(event)
