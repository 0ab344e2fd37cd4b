"""Launch machinery: cache folder, kernel loading, launch configurations and the tuning cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from codegen_triton.config import TritonConfig, default_cache_dir
from codegen_triton.runtime import LaunchConfig, TuningCache, candidate_configs, load_kernel_module
from codegen_triton.runtime.cache import atomic_write_text


def test_kiln_cache_dir_overrides_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    assert TritonConfig().resolved_cache_dir() == tmp_path / "here"
    assert TritonConfig(cache_dir=tmp_path).resolved_cache_dir() == tmp_path


def test_atomic_write_replaces_whole_file(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]


def test_kernel_source_is_loaded_from_a_file(tmp_path: Path) -> None:
    source = "def answer():\n    return 42\n"
    module = load_kernel_module(source, "kernel_x", tmp_path)
    assert module.answer() == 42
    assert module.__file__ is not None and Path(module.__file__).read_text() == source
    assert load_kernel_module(source, "kernel_x", tmp_path) is module


@pytest.mark.parametrize(
    ("kind", "sizes"),
    [
        ("pointwise", (10000, 1, 1)),
        ("tiled", (64, 1, 48)),
        ("persistent", (100, 300, 1)),
        ("looped", (7, 5000, 1)),
    ],
)
def test_candidate_configs_are_valid(kind: str, sizes: tuple[int, int, int]) -> None:
    xnumel, rnumel, ynumel = sizes
    configs = candidate_configs(kind, xnumel, rnumel, ynumel, limit=3)
    assert 1 <= len(configs) <= 3
    assert len(set(configs)) == len(configs)
    for config in configs:
        for block in config.blocks.values():
            assert block & (block - 1) == 0, "blocks are powers of two"
        if kind == "persistent":
            assert config.blocks["RBLOCK"] >= rnumel
        assert config.blocks["XBLOCK"] <= max(1024, xnumel)


def test_tuning_cache_round_trip(tmp_path: Path) -> None:
    cache = TuningCache(tmp_path)
    config = LaunchConfig({"XBLOCK": 64, "RBLOCK": 128}, num_warps=8, num_stages=2)
    assert cache.get("src", "H200", "1,1,1") is None
    cache.put("src", "H200", "1,1,1", config)
    assert cache.get("src", "H200", "1,1,1") == config
    assert cache.get("src", "A100", "1,1,1") is None
    assert cache.get("other src", "H200", "1,1,1") is None
    for path in (tmp_path / "triton" / "tuning").iterdir():
        path.write_text("{corrupt")
    assert cache.get("src", "H200", "1,1,1") is None


def test_benchmark_arguments_clone_every_tensor() -> None:
    from codegen_triton.runtime.launcher import _clone_aliased

    base = torch.randn(8)
    other = torch.randn(8)
    args = [base, other, base[:4], 8]
    cloned = _clone_aliased(args, ())
    assert cloned[3] == 8
    # An in-place kernel reads and writes one argument: benchmarking it must not touch the original.
    assert all(c is not a for c, a in zip(cloned[:3], args[:3]))
    assert torch.equal(cloned[0], base) and torch.equal(cloned[1], other) and torch.equal(cloned[2], base[:4])
    cloned[1].add_(1)
    assert not torch.equal(cloned[1], other)


def test_looped_candidates_follow_the_memory_walk() -> None:
    # A row sum (contiguous along the reduction) tries wide RBLOCKs first; a column sum (contiguous
    # along the outputs) tries more outputs per program first.
    inner = candidate_configs("looped", 4096, 50000, hint="inner", limit=4)
    outer = candidate_configs("looped", 4096, 50000, hint="outer", limit=4)
    assert len(inner) == len(outer) == 2
    assert inner[0].blocks == {"XBLOCK": 4, "RBLOCK": 512}
    # Wide rows of a few elements first (64 contiguous outputs per row load), then 8 x 128.
    assert outer[0].blocks == {"XBLOCK": 64, "RBLOCK": 8} and outer[0].num_warps == 4
    assert outer[1].blocks == {"XBLOCK": 8, "RBLOCK": 128}
    assert {c.blocks["RBLOCK"] for c in inner} == {512, 1024}


def test_small_kernels_and_persistent_reductions_are_not_tuned_by_default() -> None:
    assert len(candidate_configs("looped", 4, 10000, hint="inner", limit=4)) == 1  # 40k elements
    assert len(candidate_configs("persistent", 100000, 512, limit=4)) == 1
    assert len(candidate_configs("tiled", 4096, 1, 4096, limit=4)) == 2
    # A wide search (mode="max-autotune") still tries every candidate.
    assert len(candidate_configs("persistent", 100000, 512, limit=8)) == 4
    assert len(candidate_configs("looped", 4096, 50000, hint="inner", limit=8)) == 4  # (1, 2048) is capped to (1, 1024)
    assert len(candidate_configs("looped", 4096, 50000, hint="outer", limit=8)) == 5


def test_tuning_queues_the_timed_launches_behind_a_gpu_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    # A kernel shorter than its launch (~10-20 us of CPU) timed between two events back to back
    # times the CPU: on an H200 a split reduction's finishing kernel timed 22 us for every
    # configuration (2 us with the sleep). The GPU sleeps first, long enough for all the timed
    # launches to queue, and the start event follows the sleep.
    from codegen_triton.runtime import autotune

    calls: list[str] = []

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            pass

        def record(self) -> None:
            calls.append(f"record {len([c for c in calls if c.startswith('record')])}")

        def synchronize(self) -> None:
            calls.append("wait")

        def elapsed_time(self, other: object) -> float:
            return 1.0

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: calls.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: calls.append(f"sleep {cycles}"))
    config = LaunchConfig({"XBLOCK": 1024}, 4)
    autotune.benchmark_configs([config], lambda c: calls.append("launch"), reps=3)
    sleep = f"sleep {3 * autotune._SLEEP_CYCLES_PER_LAUNCH}"
    assert calls == ["launch", "synchronize", sleep, "record 0", "launch", "launch", "launch", "record 1", "wait"]
    assert autotune._SLEEP_CYCLES_PER_LAUNCH >= 50_000  # >= 25 us at 2 GHz: more than a launch's CPU cost
