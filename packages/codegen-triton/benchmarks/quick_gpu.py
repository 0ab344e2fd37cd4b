"""Quick GPU timing: eager vs torch.compile (the reference) vs Kiln's Triton backend on small workloads.

Run on a CUDA machine: `python3 packages/codegen-triton/benchmarks/quick_gpu.py`. Prints, per workload,
the median time of one call (CUDA events), the speedup over eager, and the cold compile seconds.
torch.compile is used only here, as the reference we are measured against.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend, TritonConfig


def _time(fn: Callable[[], Any], reps: int = 50) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _graph_time(fn: Callable[[], Any]) -> float:
    """Median ms of replaying `fn` captured in a CUDA graph (kernel time without Python overhead)."""
    try:
        fn()
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return _time(graph.replay)
    except Exception:
        return float("nan")


def _kiln(
    fn: Callable[..., Any], inputs: list[torch.Tensor], cache: Path
) -> tuple[Callable[..., Any], float]:
    start = time.perf_counter()
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*inputs)
    backend = TritonBackend(config=TritonConfig(cache_dir=cache))
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cuda": backend})
    compiled(*inputs)
    torch.cuda.synchronize()
    return compiled, time.perf_counter() - start


def _reference(fn: Callable[..., Any], inputs: list[torch.Tensor]) -> tuple[Callable[..., Any], float]:
    torch._dynamo.reset()
    start = time.perf_counter()
    compiled = torch.compile(fn)
    compiled(*inputs)
    torch.cuda.synchronize()
    return compiled, time.perf_counter() - start


def workloads() -> list[tuple[str, Callable[..., Any], list[torch.Tensor]]]:
    """(name, function, inputs) of each timed workload."""
    cuda = "cuda"
    bf16 = torch.bfloat16
    return [
        (
            "trig 16M",
            lambda x, y: torch.cos(x) + torch.sin(y),
            [torch.randn(1 << 24, device=cuda) for _ in range(2)],
        ),
        (
            "bias+gelu 4096x4096 bf16",
            lambda x, b: F.gelu(x + b),
            [torch.randn(4096, 4096, device=cuda, dtype=bf16), torch.randn(4096, device=cuda, dtype=bf16)],
        ),
        (
            "transpose-add 4096^2",
            lambda x, y: x.t() + y,
            [torch.randn(4096, 4096, device=cuda) for _ in range(2)],
        ),
        ("softmax 4096x1024", lambda x: torch.softmax(x, -1), [torch.randn(4096, 1024, device=cuda)]),
        ("softmax 512x8192", lambda x: torch.softmax(x, -1), [torch.randn(512, 8192, device=cuda)]),
        (
            "layernorm 8192x768",
            lambda x, w, b: F.layer_norm(x, (768,), w, b),
            [
                torch.randn(8192, 768, device=cuda),
                torch.randn(768, device=cuda),
                torch.randn(768, device=cuda),
            ],
        ),
        ("sum dim0 8192x1024", lambda x: x.sum(0), [torch.randn(8192, 1024, device=cuda)]),
        ("sum all 16M", lambda x: x.sum(), [torch.randn(1 << 24, device=cuda)]),
        ("bias grad 16384x768", lambda x: x.sum(0), [torch.randn(16384, 768, device=cuda)]),
        ("bn stats 16x64x64x64", lambda x: x.mean((0, 2, 3)), [torch.randn(16, 64, 64, 64, device=cuda)]),
    ]


def main() -> int:
    """Time every workload; print a table."""
    torch.manual_seed(0)
    cache = Path(tempfile.mkdtemp(prefix="kiln_bench_"))
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(
        f"{'workload':28} {'eager ms':>9} {'compile ms':>10} {'kiln ms':>8} {'compile x':>9} {'kiln x':>7} {'cold s tc':>9} {'cold s kiln':>11}"
    )
    for name, fn, inputs in workloads():
        try:
            eager = _time(lambda: fn(*inputs))
            ref, ref_cold = _reference(fn, inputs)
            ref_ms = _time(lambda: ref(*inputs))
            ours, ours_cold = _kiln(fn, inputs, cache)
            expected, got = fn(*inputs), ours(*inputs)
            torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
            ours_ms = _time(lambda: ours(*inputs))
            graphs = [_graph_time(lambda f=f: f(*inputs)) for f in (fn, ref, ours)]
            print(
                f"{name:28} {eager:9.3f} {ref_ms:10.3f} {ours_ms:8.3f} {eager / ref_ms:9.2f} {eager / ours_ms:7.2f} "
                f"{ref_cold:9.2f} {ours_cold:11.2f} {graphs[0]:12.3f} {graphs[1]:8.3f} {graphs[2]:8.3f}",
                flush=True,
            )
        except Exception as error:  # report and go on: one broken workload must not hide the others
            print(f"{name:28} FAILED: {type(error).__name__}: {str(error)[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
