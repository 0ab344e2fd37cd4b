"""Compile-time statistics: seconds spent per compilation stage, as `frontend.compile_times()` reports.

Stages nest (aotgrad calls the kernel compilers, which lower, schedule, generate and compile), so
the timer keeps a stack and charges each second to the innermost running stage only: the stage
totals add up to the wall time spent compiling.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

STAGES: tuple[str, ...] = ("capture", "aotgrad", "lowering", "scheduling", "codegen", "compile", "cudagraphs")
"""Stage names in pipeline order; "compile" is the C++/Triton compiler, "cudagraphs" recording."""


@dataclass
class _Running:
    name: str
    started: float
    children: float = 0.0


@dataclass
class CompileTimes:
    """Accumulated exclusive seconds per stage, plus how many graphs were compiled."""

    seconds: dict[str, float] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    graphs: int = 0
    cache: dict[str, list[int]] = field(default_factory=dict)
    clock: Callable[[], float] = field(default=time.perf_counter, repr=False)
    _stack: list[_Running] = field(default_factory=list, repr=False)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Charge the time spent inside the ``with`` block (minus nested stages) to `name`."""
        running = _Running(name, self.clock())
        self._stack.append(running)
        try:
            yield
        finally:
            self._stack.pop()
            total = self.clock() - running.started
            self.add(name, total - running.children)
            if self._stack:
                self._stack[-1].children += total

    def add(self, name: str, seconds: float) -> None:
        """Add `seconds` to stage `name` directly (for times measured elsewhere)."""
        self.seconds[name] = self.seconds.get(name, 0.0) + max(seconds, 0.0)
        self.calls[name] = self.calls.get(name, 0) + 1

    def count_cache(self, stage: str, hit: bool, count: int = 1) -> None:
        """Record `count` graph-cache hits (or misses) of `stage` (see `frontend.graph_cache`)."""
        counts = self.cache.setdefault(stage, [0, 0])
        counts[0 if hit else 1] += count

    def cache_counts(self) -> dict[str, dict[str, int]]:
        """``{stage: {"hits": n, "misses": m}}`` for every stage the graph cache has answered for."""
        return {stage: {"hits": hits, "misses": misses} for stage, (hits, misses) in self.cache.items()}

    def total(self) -> float:
        """Seconds spent compiling in all stages together."""
        return sum(self.seconds.values())

    def as_dict(self) -> dict[str, float]:
        """Seconds per stage, every known stage present, pipeline order first."""
        names = list(STAGES) + sorted(set(self.seconds) - set(STAGES))
        return {name: round(self.seconds.get(name, 0.0), 6) for name in names}

    def report(self) -> str:
        """A table of seconds and calls per stage, as `compile_times()` prints it."""
        lines = [f"Kiln compile times ({self.graphs} graph(s) compiled)", f"{'stage':<12} {'seconds':>10} {'calls':>6}"]
        for name, seconds in self.as_dict().items():
            lines.append(f"{name:<12} {seconds:>10.4f} {self.calls.get(name, 0):>6}")
        lines.append(f"{'total':<12} {self.total():>10.4f}")
        if self.cache:
            lines.append(f"{'graph cache':<12} {'hits':>10} {'misses':>6}")
            for stage, (hits, misses) in self.cache.items():
                lines.append(f"{stage:<12} {hits:>10} {misses:>6}")
        return "\n".join(lines)

    def reset(self) -> None:
        """Forget everything recorded so far."""
        self.seconds.clear()
        self.calls.clear()
        self.cache.clear()
        self.graphs = 0


PROCESS_TIMES = CompileTimes()
"""The process-wide record behind `compile_times()`: compilation is per process, so is its cost."""


def compile_times(
    repr: Literal["str", "dict", "cache"] = "str",
) -> str | dict[str, float] | dict[str, dict[str, int]]:
    """Seconds spent per compilation stage since the process started (or since `frontend.reset()`).

    Args:
        repr: ``"str"`` for a printable table (with the graph cache's hits and misses per stage),
            ``"dict"`` for ``{stage: seconds}``, ``"cache"`` for ``{stage: {"hits": n, "misses": m}}``.

    Example::

        frontend.compile(model)(x)
        print(frontend.compile_times())
    """
    if repr == "dict":
        return PROCESS_TIMES.as_dict()
    if repr == "cache":
        return PROCESS_TIMES.cache_counts()
    if repr != "str":
        raise ValueError(f"compile_times(repr=...) takes 'str', 'dict' or 'cache', got {repr!r}")
    return PROCESS_TIMES.report()


def move_seconds(times: CompileTimes, source: str, parts: dict[str, float]) -> None:
    """Re-attribute `parts` ({stage: seconds}) from stage `source`, e.g. when a sibling reports a split."""
    for name, seconds in parts.items():
        if name == source or seconds <= 0:
            continue
        taken = min(seconds, times.seconds.get(source, 0.0))
        times.seconds[source] = times.seconds.get(source, 0.0) - taken
        times.add(name, taken)
