"""Choosing a launch configuration: candidates per kernel kind, benchmarking, and a disk cache of winners."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codegen_triton.runtime.cache import read_keyed_json, source_hash, write_keyed_json

__all__ = ["LaunchConfig", "TuningCache", "benchmark_configs", "candidate_configs", "next_power_of_2"]


@dataclass(frozen=True)
class LaunchConfig:
    """One way to launch a kernel: its block sizes (constexpr arguments) and warps/stages.

    Attributes:
        blocks: constexpr block sizes by name, e.g. `{"XBLOCK": 1024}` or `{"XBLOCK": 8, "RBLOCK": 128}`.
        num_warps: warps per program.
        num_stages: software-pipelining stages (looped kernels).
    """

    blocks: dict[str, int] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 1

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.blocks.items())), self.num_warps, self.num_stages))

    def to_json(self) -> dict[str, object]:
        """A JSON-ready form, for the tuning cache."""
        return {"blocks": dict(self.blocks), "num_warps": self.num_warps, "num_stages": self.num_stages}

    @staticmethod
    def from_json(data: dict[str, object]) -> LaunchConfig:
        """The inverse of `to_json`."""
        blocks = data.get("blocks", {})
        assert isinstance(blocks, dict)
        return LaunchConfig(
            {str(k): int(v) for k, v in blocks.items()},
            int(str(data.get("num_warps", 4))),
            int(str(data.get("num_stages", 1))),
        )


def next_power_of_2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _warps_for(elements: int) -> int:
    return max(1, min(8, elements // 256))


def candidate_configs(
    kind: str,
    xnumel: int,
    rnumel: int = 1,
    ynumel: int = 1,
    *,
    max_rblock: int = 1024,
    limit: int = 4,
    hint: str = "",
) -> list[LaunchConfig]:
    """A few launch configurations worth trying for a kernel, best guess first.

    Args:
        kind: "pointwise", "tiled" (2-D pointwise), "persistent" or "looped" (reductions).
        xnumel: the (hinted) number of pointwise elements, or output elements of a reduction.
        rnumel: the reduction size (reductions only).
        ynumel: the outer size of a tiled pointwise kernel.
        max_rblock: the largest RBLOCK of looped reductions.
        limit: at most this many configurations.
        hint: a reduction's memory walk ("inner", "outer" or ""; see `KernelPlan.hint`).

    Returns:
        Configurations; the first is the heuristic choice, used without tuning under the interpreter.
    """
    x_cap = next_power_of_2(max(1, xnumel))
    configs: list[LaunchConfig] = []
    if kind == "pointwise":
        for xblock in (1024, 512, 256, 128):
            block = min(xblock, x_cap)
            configs.append(LaunchConfig({"XBLOCK": block}, _warps_for(block)))
    elif kind == "tiled":
        y_cap = next_power_of_2(max(1, ynumel))
        for yblock, xblock in ((16, 64), (64, 32), (32, 32), (64, 64)):
            yb, xb = min(yblock, y_cap), min(xblock, x_cap)
            configs.append(LaunchConfig({"YBLOCK": yb, "XBLOCK": xb}, _warps_for(yb * xb)))
    elif kind == "persistent":
        rblock = next_power_of_2(max(1, rnumel))
        for elements in (4096, 2048, 8192, 1024):
            xblock = max(1, min(x_cap, elements // rblock))
            configs.append(LaunchConfig({"XBLOCK": xblock, "RBLOCK": rblock}, _warps_for(xblock * rblock)))
    elif kind == "looped":
        r_cap = min(max_rblock, next_power_of_2(max(1, rnumel)))
        for xblock, rblock, min_warps in (*_LOOPED_FIRST.get(hint, _LOOPED_FIRST[""]), (64, 64, 1), (1, 2048, 1)):
            xb, rb = min(xblock, x_cap), min(rblock, r_cap)
            warps = max(min_warps, _warps_for(xb * rb))
            configs.append(LaunchConfig({"XBLOCK": xb, "RBLOCK": rb}, warps, num_stages=2))
    else:
        raise ValueError(f"unknown kernel kind {kind!r}")
    unique: list[LaunchConfig] = []
    for config in configs:
        if config not in unique:
            unique.append(config)
    if limit < WIDE_SEARCH:
        limit = min(limit, _focused_count(kind, xnumel * rnumel * ynumel))
    return unique[: max(1, limit)]


WIDE_SEARCH = 8
"""A `limit` of at least this many tries every candidate (frontend's mode="max-autotune")."""

# Looped reductions: the configurations tried first, by the loads' memory walk, as (XBLOCK, RBLOCK,
# fewest warps). From timing every candidate of 194 looped reductions of six models (ResNet-18/50,
# MobileNetV2, ViT-B/16, BERT-base, GPT-2; H200): the best of the first two is within 4% (inner), 2%
# (neither) of the best of all. Column sums ("outer") want wide rows of few elements each: 64
# contiguous outputs per row load (128 bytes at bfloat16); 8 x 128 loads 16 bytes per row. On an H200
# a column sum of 32768 x 768 took 29 us at 64 x 8 (4 warps) and 59 us at 8 x 128, and a LLaMA
# RMS-norm backward's three weight gradients (11 loads of 2048 x 2048) 0.15 ms at 8 x 128.
_LOOPED_FIRST: dict[str, tuple[tuple[int, int, int], ...]] = {
    "inner": ((4, 512, 1), (1, 1024, 1), (8, 128, 1)),
    "outer": ((64, 8, 4), (8, 128, 1), (4, 512, 1)),
    "": ((1, 1024, 1), (8, 128, 1), (4, 512, 1)),
}

_TINY_ELEMENTS = 1 << 16
"""Kernels over at most this many elements run in launch time whatever their blocks: never tuned."""


def _focused_count(kind: str, elements: int) -> int:
    """How many candidates the default search tries (each costs a Triton compile, ~0.5 s of CPU).

    The same tuning runs showed: persistent reductions within 6% of their best with the first
    candidate, tiled kernels within 1% with the best of the first two; pointwise kernels are
    memory-bound and the heuristic is near the best.
    """
    if kind in ("pointwise", "persistent") or elements <= _TINY_ELEMENTS:
        return 1
    return 2


def benchmark_configs(
    configs: Sequence[LaunchConfig], launch: Callable[[LaunchConfig], None], *, reps: int = 20
) -> tuple[LaunchConfig, list[float]]:
    """Time `launch(config)` for each configuration with CUDA events; the fastest and all timings (ms).

    Each configuration is launched once first (compiling it) and then `reps` times between two events.
    The GPU first sleeps while the launches are queued behind it, so the events time the kernels, not
    the CPU's launch rate (a kernel shorter than its launch, ~10-20 us, would otherwise time the CPU:
    every configuration the same, the choice noise). A configuration that fails to compile or launch
    (e.g. out of shared memory) is skipped.
    """
    import torch

    timings: list[float] = []
    best: LaunchConfig | None = None
    best_ms = float("inf")
    for config in configs:
        try:
            launch(config)
            torch.cuda.synchronize()
        except Exception:
            timings.append(float("inf"))
            continue
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(_SLEEP_CYCLES_PER_LAUNCH * reps)
        start.record()
        for _ in range(reps):
            launch(config)
        end.record()
        end.synchronize()
        elapsed = start.elapsed_time(end) / reps
        timings.append(elapsed)
        if elapsed < best_ms:
            best, best_ms = config, elapsed
    if best is None:
        raise RuntimeError(
            "no launch configuration of the kernel could run; see the kernel source in the cache"
        )
    return best, timings


_SLEEP_CYCLES_PER_LAUNCH = 100_000
"""GPU clock cycles slept per timed launch before timing (about 50 us at 2 GHz: more than a launch's CPU cost)."""


class TuningCache:
    """Winners of autotuning on disk, one JSON file per (kernel source, device, size bucket)."""

    def __init__(self, cache_dir: Path) -> None:
        """Args: cache_dir: the root of Kiln's cache; files go to `cache_dir/triton/tuning/`."""
        self.folder = cache_dir / "triton" / "tuning"

    def _key(self, source: str, device: str, bucket: str) -> str:
        import triton

        return source_hash(source, device, bucket, triton.__version__)

    def get(self, source: str, device: str, bucket: str) -> LaunchConfig | None:
        """The cached winner, or None (also for a damaged record or one stored under another key)."""
        key = self._key(source, device, bucket)
        data = read_keyed_json(self.folder / f"{key}.json", key)
        if not isinstance(data, dict):
            return None
        try:
            return LaunchConfig.from_json(data)
        except (AssertionError, TypeError, ValueError, KeyError):
            return None

    def put(self, source: str, device: str, bucket: str, config: LaunchConfig) -> None:
        """Record a winner (atomically, with its key; an unwritable cache only loses the record)."""
        key = self._key(source, device, bucket)
        write_keyed_json(self.folder / f"{key}.json", key, config.to_json())
