"""Timing and memory: per-call timers (CUDA events on GPU), paired interleaved measurement, peak memory.

Every call is timed on its own: on CUDA with a pair of events around it (read after one
synchronization per block), on CPU with `time.perf_counter` (CPU kernels run synchronously).
"""

from __future__ import annotations

import ctypes
import gc
import math
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tools.bench.config import MeasureConfig
from tools.bench.stats import TimingSummary, median, summarize

Call = Callable[[], object]


def synchronize(device: str) -> None:
    """Wait for queued GPU work on `device` (a no-op on CPU)."""
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(call: Call, count: int, device: str) -> list[float]:
    """Run `call` `count` times; each call's time in milliseconds."""
    if device == "cuda":
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(count)]
        torch.cuda.synchronize()
        for start, end in events:
            start.record()
            call()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) for start, end in events]
    samples = []
    for _ in range(count):
        begin = time.perf_counter()
        call()
        samples.append((time.perf_counter() - begin) * 1e3)
    return samples


@dataclass(frozen=True)
class PairedTiming:
    """The result of timing eager and compiled calls of the same work, interleaved."""

    eager: TimingSummary
    compiled: TimingSummary
    round_speedups: tuple[float, ...] = ()

    @property
    def speedup(self) -> float:
        """Eager median over compiled median."""
        return self.eager.median / self.compiled.median


def calls_per_block(estimate_ms: float, config: MeasureConfig) -> int:
    """How many calls make one block: enough for `min_time_s` over all rounds and `min_reps` calls in all."""
    by_time = math.ceil(config.min_time_s * 1e3 / config.rounds / max(estimate_ms, 1e-3))
    by_count = math.ceil(config.min_reps / config.rounds)
    return max(1, min(max(by_time, by_count), math.ceil(config.max_reps / config.rounds)))


def paired_timing(eager: Call, compiled: Call, device: str, config: MeasureConfig) -> PairedTiming:
    """Warm both up (untimed), then alternate blocks of eager and compiled calls; medians of all calls.

    Block sizes come from the slower side's warm-up time, so both sides get the same number of calls.
    `round_speedups` (eager block median over compiled block median, per round) show whether the
    speedup held steady while the machine's load changed.
    """
    estimate = 0.0
    for call in (eager, compiled):
        warmup = time_calls(call, max(config.warmup_calls, 1), device)
        estimate = max(estimate, sorted(warmup)[len(warmup) // 2])
    block = calls_per_block(estimate, config)
    eager_samples: list[float] = []
    compiled_samples: list[float] = []
    round_speedups = []
    for _ in range(config.rounds):
        eager_block = time_calls(eager, block, device)
        compiled_block = time_calls(compiled, block, device)
        round_speedups.append(median(eager_block) / median(compiled_block))
        eager_samples += eager_block
        compiled_samples += compiled_block
    return PairedTiming(summarize(eager_samples), summarize(compiled_samples), tuple(round_speedups))


_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _release_free_heap() -> None:
    """Hand freed heap memory back to the OS (glibc), so a step's allocations show up as new resident pages."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _reset_peak_rss() -> bool:
    _release_free_heap()
    try:
        _CLEAR_REFS.write_text("5")  # Linux: resets the peak resident set size (VmHWM) to the current one
        return True
    except OSError:
        return False


def _peak_rss_mb() -> float:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB; never reset


def peak_memory_mb(call: Call, device: str, calls: int) -> tuple[float, str]:
    """Peak memory over `calls` calls, and what was measured.

    CUDA: `torch.cuda.max_memory_allocated` after resetting the peak, minus what was allocated before
    the calls ("cuda_step_peak_above_resident": the memory a step needs on top of weights and inputs;
    the other model copy and saved results a benchmark holds do not count). CPU: the process's peak
    resident set size after resetting it ("cpu_peak_rss"; "cpu_peak_rss_since_start" where the peak
    cannot be reset, which then includes everything before); compare eager's and the compiled
    model's measured at the same point of a run.
    """
    if device == "cuda":
        torch.cuda.synchronize()
        resident = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - resident) / 2**20, "cuda_step_peak_above_resident"
    kind = "cpu_peak_rss" if _reset_peak_rss() else "cpu_peak_rss_since_start"
    for _ in range(calls):
        call()
    return _peak_rss_mb(), kind
