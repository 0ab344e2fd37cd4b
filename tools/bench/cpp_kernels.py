"""C++ kernels on the CPU: eager vs torch.compile vs Kiln's inductor_ir + codegen_cpp, side by side.

Run: ``python3 -m tools.bench.cpp_kernels [--threads 2] [--repeats 30]``.

Each workload is traced with make_fx into an ATen graph; Kiln compiles that graph with
``inductor_ir.compile_graph(..., backends={"cpu": CppBackend()})`` (cold: its kernels are not in
the cache; warm: a fresh backend finds them there; one-time process costs, the compiler probe
and imports, are paid by a warm-up graph first), torch.compile compiles the Python function (the
reference we are measured against; its on-disk caches point at a fresh folder). Calls are timed interleaved (eager, torch.compile, Kiln in
turn) and the median is reported, which keeps a shared, busy machine from favouring one side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend, CppConfig


@dataclass(frozen=True)
class Workload:
    """A function and its inputs."""

    name: str
    fn: Callable[..., Any]
    inputs: tuple[torch.Tensor, ...]


def pointwise_chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """A chain of pointwise ops with transcendental functions: one fused kernel for a compiler."""
    return torch.relu(torch.sin(x * 1.5 + 0.5) * torch.sigmoid(y) + torch.tanh(x)) - 0.25 * y


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dim."""
    return torch.softmax(x, -1)


def workloads() -> list[Workload]:
    """The workloads of this benchmark, with fresh random inputs."""
    n = 4 * 1024 * 1024
    return [
        Workload("pointwise chain (4M)", pointwise_chain, (torch.randn(n), torch.randn(n))),
        Workload("softmax (4096, 1024)", softmax, (torch.randn(4096, 1024),)),
    ]


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _time_interleaved(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    for call in calls.values():  # warm up
        call()
        call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: _median_ms(values) for name, values in samples.items()}


def _kiln_compile(workload: Workload, cache_dir: Path) -> tuple[Callable[..., Any], float]:
    start = time.perf_counter()
    gm = make_fx(workload.fn)(*workload.inputs)
    compiled = inductor_ir.compile_graph(
        gm, list(workload.inputs), backends={"cpu": CppBackend(CppConfig(cache_dir=cache_dir))}
    )
    return compiled, time.perf_counter() - start


def _torch_compile(workload: Workload) -> tuple[Callable[..., Any], float]:
    torch._dynamo.reset()
    compiled = torch.compile(workload.fn)
    start = time.perf_counter()
    compiled(*workload.inputs)
    return compiled, time.perf_counter() - start


def run(threads: int, repeats: int) -> list[dict[str, Any]]:
    """Measure every workload; one row per workload."""
    torch.set_num_threads(threads)
    rows = []
    cache = Path(tempfile.mkdtemp(prefix="kiln-bench-cache-"))
    # One-time costs (imports, the compiler probe) are paid here, not by the first workload.
    _kiln_compile(Workload("warm-up", lambda x: x + 1, (torch.randn(8),)), cache)
    for workload in workloads():
        kiln, kiln_cold = _kiln_compile(workload, cache)  # its kernels are not in the cache yet
        _, kiln_warm = _kiln_compile(workload, cache)
        inductor, inductor_cold = _torch_compile(workload)
        expected = workload.fn(*workload.inputs)
        torch.testing.assert_close(kiln(*workload.inputs), expected, rtol=1e-4, atol=1e-4)
        args = workload.inputs
        times = _time_interleaved(
            {
                "eager": lambda: workload.fn(*args),
                "torch.compile": lambda: inductor(*args),
                "kiln": lambda: kiln(*args),
            },
            repeats,
        )
        rows.append(
            {
                "workload": workload.name,
                **times,
                "kiln_cold_s": kiln_cold,
                "kiln_warm_s": kiln_warm,
                "torch_compile_cold_s": inductor_cold,
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]], threads: int) -> str:
    """A Markdown table of the rows."""
    lines = [
        f"CPU, {threads} threads; times are medians of interleaved calls (ms); compile in seconds.",
        "",
        "| workload | eager ms | torch.compile ms | kiln ms | kiln speedup | torch.compile speedup "
        "| kiln compile cold / warm s | torch.compile compile s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        lines.append(
            f"| {row['workload']} | {row['eager']:.2f} | {row['torch.compile']:.2f} | {row['kiln']:.2f} "
            f"| {row['eager'] / row['kiln']:.2f}x | {row['eager'] / row['torch.compile']:.2f}x "
            f"| {row['kiln_cold_s']:.2f} / {row['kiln_warm_s']:.2f} | {row['torch_compile_cold_s']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    """Parse arguments, run, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    # torch.compile's cold compile must not come from its own on-disk caches of earlier runs.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-bench-inductor-"))
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    print(format_table(run(args.threads, args.repeats), args.threads))


if __name__ == "__main__":
    main()
