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


aten = torch.ops.aten


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Layer norm over the last dim (BERT/GPT-2 hidden size)."""
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


def layer_norm_backward(
    g: torch.Tensor, x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, w: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Layer norm's backward: input grad (a row reduction) and weight/bias grads (column sums)."""
    return tuple(aten.native_layer_norm_backward(g, x, [x.shape[-1]], mean, rstd, w, b, [True, True, True]))


def softmax_backward(g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Softmax's backward over the last dim."""
    return aten._softmax_backward_data(g, y, -1, torch.float32)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """GELU with erf (BERT's activation)."""
    return torch.nn.functional.gelu(x)


def gelu_backward(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """GELU(erf)'s backward."""
    return aten.gelu_backward(g, x)


def bias_grad(g: torch.Tensor) -> torch.Tensor:
    """A linear layer's bias grad: a column sum."""
    return g.sum(0)


def long_sum(x: torch.Tensor) -> torch.Tensor:
    """One long float sum to a scalar (split across threads)."""
    return x.sum()


def row_var_mean(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Welford over long rows."""
    return torch.var_mean(x, dim=-1)


def batch_norm_train(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """BatchNorm2d's training forward (batch statistics over N, H, W)."""
    return torch.nn.functional.batch_norm(x, None, None, w, b, training=True)


def batch_norm_backward(
    g: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor, invstd: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """BatchNorm2d's training backward."""
    return tuple(
        aten.native_batch_norm_backward(g, x, w, None, None, mean, invstd, True, 1e-5, [True, True, True])
    )


def attention_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Attention's scale, causal mask and softmax (GPT-2 style)."""
    return torch.softmax(torch.where(mask, scores * 0.125, torch.finfo(torch.float32).min), -1)


def _layer_norm_saved(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(x, mean, rstd, w, b): what layer norm's backward reads."""
    _, mean, rstd = aten.native_layer_norm(x, [x.shape[-1]], w, b, 1e-5)
    return x, mean, rstd, w, b


def _batch_norm_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    var, mean = torch.var_mean(x, dim=(0, 2, 3), unbiased=False)
    return mean, torch.rsqrt(var + 1e-5)


def workloads() -> list[Workload]:
    """The workloads of this benchmark, with fresh random inputs."""
    n = 4 * 1024 * 1024
    rows, hidden = 4096, 768
    x = torch.randn(rows, hidden)
    w, b = torch.randn(hidden), torch.randn(hidden)
    _, mean, rstd = aten.native_layer_norm(x, [hidden], w, b, 1e-5)
    sm = torch.softmax(torch.randn(4096, 1024), -1)
    image = torch.randn(32, 64, 28, 28)
    bn_mean, bn_invstd = _batch_norm_stats(image)
    heads = torch.randn(2 * 12, 256, 256)
    causal = torch.ones(256, 256, dtype=torch.bool).tril()
    return [
        Workload("pointwise chain (4M)", pointwise_chain, (torch.randn(n), torch.randn(n))),
        Workload("softmax (4096, 1024)", softmax, (torch.randn(4096, 1024),)),
        Workload("softmax backward (4096, 1024)", softmax_backward, (torch.randn(4096, 1024), sm)),
        Workload("layer norm (4096, 768)", layer_norm, (x, w, b)),
        Workload("layer norm short rows (32768, 128)", layer_norm, (torch.randn(32768, 128), w[:128], b[:128])),
        Workload("softmax short rows (32768, 64)", softmax, (torch.randn(32768, 64),)),
        Workload(
            "softmax backward short rows (32768, 64)",
            softmax_backward,
            (torch.randn(32768, 64), torch.softmax(torch.randn(32768, 64), -1)),
        ),
        Workload(
            "layer norm backward short rows (32768, 128)",
            layer_norm_backward,
            (torch.randn(32768, 128), *_layer_norm_saved(torch.randn(32768, 128), w[:128], b[:128])),
        ),
        Workload("layer norm backward (4096, 768)", layer_norm_backward, (torch.randn(rows, hidden), x, mean, rstd, w, b)),
        Workload("gelu erf (4096, 3072)", gelu, (torch.randn(rows, 4 * hidden),)),
        Workload("gelu erf backward (4096, 3072)", gelu_backward, (torch.randn(rows, 4 * hidden), torch.randn(rows, 4 * hidden))),
        Workload("bias grad column sum (4096, 768)", bias_grad, (torch.randn(rows, hidden),)),
        Workload("sum (4M)", long_sum, (torch.randn(n),)),
        Workload("var_mean rows (256, 16384)", row_var_mean, (torch.randn(256, 16384) + 100.0,)),
        Workload("batch norm train (32, 64, 28, 28)", batch_norm_train, (image, torch.randn(64), torch.randn(64))),
        Workload(
            "batch norm backward (32, 64, 28, 28)",
            batch_norm_backward,
            (torch.randn_like(image), image, torch.randn(64), bn_mean, bn_invstd),
        ),
        Workload("attention mask+softmax (24, 256, 256)", attention_softmax, (torch.randn_like(heads), causal)),
    ]


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1e3


def _min_ms(samples: list[float]) -> float:
    return min(samples) * 1e3


STATISTICS = {"median": _median_ms, "min": _min_ms}


def _time_interleaved(
    calls: dict[str, Callable[[], Any]], repeats: int, statistic: str = "median"
) -> dict[str, float]:
    for call in calls.values():  # warm up
        call()
        call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            samples[name].append(time.perf_counter() - start)
    return {name: STATISTICS[statistic](values) for name, values in samples.items()}


def _kiln_compile(workload: Workload, cache_dir: Path) -> tuple[Callable[..., Any], float]:
    start = time.perf_counter()
    gm = make_fx(workload.fn, decomposition_table=inductor_ir.decompositions())(*workload.inputs)
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


def run(threads: int, repeats: int, only: str | None = None, statistic: str = "median") -> list[dict[str, Any]]:
    """Measure every workload (those whose name contains ``only``, when given); one row per workload."""
    torch.set_num_threads(threads)
    rows = []
    cache = Path(tempfile.mkdtemp(prefix="kiln-bench-cache-"))
    # One-time costs (imports, the compiler probe) are paid here, not by the first workload.
    _kiln_compile(Workload("warm-up", lambda x: x + 1, (torch.randn(8),)), cache)
    for workload in workloads():
        if only is not None and not any(part in workload.name for part in only.split(",")):
            continue
        kiln, kiln_cold = _kiln_compile(workload, cache)  # its kernels are not in the cache yet
        _, kiln_warm = _kiln_compile(workload, cache)
        inductor, inductor_cold = _torch_compile(workload)
        expected = workload.fn(*workload.inputs)
        torch.testing.assert_close(kiln(*workload.inputs), expected, rtol=1e-4, atol=1e-3)
        args = workload.inputs
        times = _time_interleaved(
            {
                "eager": lambda: workload.fn(*args),
                "torch.compile": lambda: inductor(*args),
                "kiln": lambda: kiln(*args),
            },
            repeats,
            statistic,
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


def format_table(rows: list[dict[str, Any]], threads: int, statistic: str = "median") -> str:
    """A Markdown table of the rows."""
    lines = [
        f"CPU, {threads} threads; times are the {statistic} of interleaved calls (ms); compile in seconds.",
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
    parser.add_argument(
        "--statistic", choices=sorted(STATISTICS), default="median", help="min resists a busy machine better"
    )
    parser.add_argument("--only", default=None, help="comma-separated parts of workload names to run")
    args = parser.parse_args()
    # torch.compile's cold compile must not come from its own on-disk caches of earlier runs.
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-bench-inductor-"))
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    print(format_table(run(args.threads, args.repeats, args.only, args.statistic), args.threads, args.statistic))


if __name__ == "__main__":
    main()
