"""A one-line progress indicator for long compiles: which graph, which stage, how long so far.

Shown on stderr only when it is a terminal and ``config.progress`` is on (KILN_PROGRESS=0 turns
it off), and only once a graph has been compiling for `DELAY` seconds; the line is rewritten in
place and erased when the graph is done. A background thread redraws it, so a long single stage
(the C++ compiler, say) still shows its seconds ticking.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO

DELAY = 2.0
"""Seconds a graph compiles before the indicator appears."""

INTERVAL = 0.25
"""Seconds between redraws."""


class CompileProgress:
    """The progress line of one compiled function's graphs (one graph at a time)."""

    def __init__(self, label: str, stream: TextIO, delay: float = DELAY, interval: float = INTERVAL) -> None:
        self.label = label
        self.stream = stream
        self.delay = delay
        self.interval = interval
        self.stages: list[str] = []
        self.graph = 0
        self.process_graph = 0
        self._started = 0.0
        self._shown = False
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def for_stream(cls, label: str, stream: TextIO, enabled: bool) -> CompileProgress | None:
        """An indicator writing to `stream` when `enabled` and `stream` is a terminal, else None."""
        try:
            is_terminal = bool(stream.isatty())
        except (AttributeError, ValueError):
            is_terminal = False
        return cls(label, stream) if enabled and is_terminal else None

    def line(self) -> str:
        """The current text of the indicator."""
        stage = self.stages[-1] if self.stages else "capture"
        seconds = time.perf_counter() - self._started
        return (
            f"[kiln] compiling {self.label}: graph {self.graph} of {self.process_graph} so far in this process"
            f" · {stage} · {seconds:.0f}s"
        )

    def start_graph(self, graph: int, process_graph: int) -> None:
        """A graph starts compiling: the `graph`-th of this function, `process_graph`-th of the process."""
        self.finish_graph()
        self.graph, self.process_graph = graph, process_graph
        self.stages.clear()
        self._started = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name="kiln-progress", daemon=True)
        self._thread.start()

    def enter(self, stage: str) -> None:
        """A stage of the current graph starts."""
        self.stages.append(stage)

    def leave(self) -> None:
        """The innermost running stage ends."""
        if self.stages:
            self.stages.pop()

    def finish_graph(self) -> None:
        """The graph is done: stop redrawing and erase the line if it was shown."""
        if self._stop is not None:
            self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._stop = self._thread = None
        if self._shown:
            self._write("\r\x1b[K")
            self._shown = False

    def _run(self, stop: threading.Event) -> None:
        if stop.wait(self.delay):
            return
        while not stop.is_set():
            self._write(f"\r{self.line()}\x1b[K")
            self._shown = True
            stop.wait(self.interval)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken terminal: the indicator is only a courtesy
