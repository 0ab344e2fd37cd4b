"""The context object one `frontend.compile` call hands to its backend: config, timer, debug, logs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from frontend.config import Config
from frontend.debug import GraphArtifacts, new_graph_artifacts
from frontend.logs import EventLog
from frontend.stats import PROCESS_TIMES, CompileTimes


@dataclass(frozen=True)
class KernelRecord:
    """One kernel a code generator produced for a compiled function.

    Attributes:
        name: the kernel's name, as in the generated code (``cpp_fused_add_relu_3``).
        device: the device type it runs on ("cpu", "cuda").
        ops: how many ATen operations were fused into it.
    """

    name: str
    device: str
    ops: int


@dataclass
class CompileContext:
    """What a backend needs besides the graph: passed explicitly, never read from globals.

    Attributes:
        config: the configuration snapshot taken when `frontend.compile` was called.
        label: the user's function or module name, for messages and debug folders.
        times: where stage timings go (the process-wide record behind `compile_times()`).
        events: the KILN_LOGS event log.
        graphs_compiled: how many graphs this compiled function has handed to its backend.
        graph_breaks, recompilations: how many of each capture reported for it.
        artifacts: the debug folder of the graph being compiled (None unless debugging).
        kernels: every kernel generated for it so far (forward and backward graphs), in order.
    """

    config: Config
    label: str = "fn"
    times: CompileTimes = field(default_factory=lambda: PROCESS_TIMES)
    events: EventLog = field(default_factory=lambda: EventLog(frozenset()))
    graphs_compiled: int = 0
    graph_breaks: int = 0
    recompilations: int = 0
    artifacts: GraphArtifacts | None = None
    kernels: list[KernelRecord] = field(default_factory=list)

    @classmethod
    def for_config(cls, config: Config, label: str) -> CompileContext:
        """A context for compiling `label` under `config`."""
        return cls(config=config, label=label, events=EventLog(config.logs))

    def new_artifacts(self) -> GraphArtifacts | None:
        """A debug folder for the next graph (also kept as `artifacts`), or None when debugging is off."""
        if not self.config.debug:
            return None
        self.artifacts = new_graph_artifacts(self.config.resolved_debug_dir(), self.label)
        return self.artifacts

    @contextlib.contextmanager
    def stage(self, name: str, artifacts: GraphArtifacts | None = None) -> Iterator[None]:
        """Time a compilation stage into `times` (and into the graph's timings.json when debugging)."""
        started = time.perf_counter()
        with self.times.stage(name):
            yield
        if artifacts is not None:
            artifacts.add_timing(name, time.perf_counter() - started)
