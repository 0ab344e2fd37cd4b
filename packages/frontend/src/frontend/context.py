"""The context object one `frontend.compile` call hands to its backend: config, timer, debug, logs."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from frontend.config import Config
from frontend.debug import GraphArtifacts, new_graph_artifacts
from frontend.logs import EventLog
from frontend.progress import CompileProgress
from frontend.stats import PROCESS_TIMES, CompileTimes

if TYPE_CHECKING:
    from frontend.compile_report import ProcessReport
    from frontend.repro import ReproRecorder


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
        repro: writes repro scripts of failing graphs (None unless ``config.repro_after`` or the
            accuracy level asks for them).
        report: the process's compile report, when one is being recorded (KILN_REPORT).
        progress: the progress line of long compiles (None when stderr is not a terminal).
        cache: C++/Triton libraries asked for and found ready in the cache so far (libraries, hits).
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
    repro: ReproRecorder | None = None
    report: ProcessReport | None = None
    progress: CompileProgress | None = None
    cache: list[int] = field(default_factory=lambda: [0, 0])

    @classmethod
    def for_config(cls, config: Config, label: str) -> CompileContext:
        """A context for compiling `label` under `config`."""
        from frontend.compile_report import PROCESS_REPORT
        from frontend.repro import ReproRecorder

        if config.repro_level == "accuracy" and getattr(config, "graph_cache", False):
            config = config.with_options({"graph_cache": False})  # every graph compiles, so every graph is checked
        context = cls(config=config, label=label, events=EventLog(config.logs))
        context.repro = ReproRecorder.for_config(config, label)
        context.progress = CompileProgress.for_stream(label, sys.stderr, config.progress)
        if config.report is not None:
            PROCESS_REPORT.activate(config.report)
        if PROCESS_REPORT.active:
            context.report = PROCESS_REPORT
            context.events = dataclasses.replace(context.events, sink=PROCESS_REPORT.event_sink(context))
        return context

    def new_artifacts(self) -> GraphArtifacts | None:
        """A debug folder for the next graph (also kept as `artifacts`), or None when debugging is off.

        While a compile report is recorded, every graph gets artifacts kept in memory (and on disk
        only when debugging).
        """
        if not self.config.debug and self.report is None:
            return None
        if self.config.debug:
            self.artifacts = new_graph_artifacts(self.config.resolved_debug_dir(), self.label)
        else:
            self.artifacts = GraphArtifacts(None)
        if self.report is not None:
            self.artifacts.files = {}
        return self.artifacts

    def note_cache(self, libraries: int, hits: int) -> None:
        """Count compiled libraries a code generator asked for and how many of them its cache had."""
        self.cache[0] += libraries
        self.cache[1] += hits

    @contextlib.contextmanager
    def stage(self, name: str, artifacts: GraphArtifacts | None = None) -> Iterator[None]:
        """Time a compilation stage into `times` (and into the graph's timings.json when debugging)."""
        started = time.perf_counter()
        if self.progress is not None:
            self.progress.enter(name)
        try:
            with self.times.stage(name):
                yield
        finally:
            if self.progress is not None:
                self.progress.leave()
        if artifacts is not None:
            artifacts.add_timing(name, time.perf_counter() - started)
