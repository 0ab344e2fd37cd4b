"""DDP training step time: eager DDP vs torch.compile(DDP) vs Kiln (bucket-split and whole), one process per GPU.

Each compiler trains a fresh, identically seeded copy of the model wrapped in
`DistributedDataParallel` (SGD, loss = mean of the output); every step's batch is drawn (on the
device) before the first step; the first `--warmup` steps (compiling included) are not timed, then
`--steps` steps are, each ended by a device synchronize. Rank 0
prints, per model and compiler, the median and best step time, the median time until a step returned to
Python ("host ms": the CPU's share; a step whose host ms is near its step ms is bound by the CPU), the
speedup over eager DDP, the
seconds to the end of the first step (compile), the number of graphs the compiled model ran as and
the largest parameter difference from eager DDP after the warm-up and timed steps (all-reduce
correctness: it should be at rounding level, not at the size of an update). On CUDA, `--profile-steps`
more steps run under the profiler: per step, the NCCL kernels' time ("comm ms"), the share of it
during which a compute kernel ran too ("hidden": all-reduce overlapping backward) and the compute
kernels' busy time.

On a 2-GPU host (NCCL):

    torchrun --nproc-per-node 2 -m tools.bench.ddp                      # resnet50 and gpt2
    torchrun --nproc-per-node 2 -m tools.bench.ddp --models gpt2 --bucket-cap-mb 25 --steps 30

On the CPU (gloo; a smoke test of the harness, not a measurement):

    torchrun --nproc-per-node 2 -m tools.bench.ddp --device cpu --models mlp --steps 3 --warmup 1

`--compilers` picks among eager, torch.compile (the reference, as in every benchmark here),
kiln (buckets split, the default) and kiln-whole (``optimize_ddp=False``: one graph, all
gradients all-reduced after its backward). Models are those of `tools.bench` (resnet50 and gpt2
are the GPU-sized ones; resnet50 needs torchvision or falls back to transformers' ResNet).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from tools.bench import models_micro, models_zoo  # noqa: F401  (registers the models)
from tools.bench.registry import MODELS, BuildContext, Workload

COMPILERS = ("eager", "torch.compile", "kiln", "kiln-whole")


@dataclass
class Result:
    """One compiler's numbers on one model (rank 0's view)."""

    compiler: str
    step_ms: float
    best_ms: float
    host_ms: float
    first_step_s: float
    graphs: int | None
    max_param_diff: float
    overlap: Overlap | None = None


@dataclass(frozen=True)
class Overlap:
    """How much of a step's communication ran while compute kernels ran (from a profiler trace).

    `comm_ms` is the NCCL kernels' time per step, `hidden_ms` the part of it during which some
    other (compute) kernel ran too, `compute_ms` the compute kernels' busy time (their union).
    """

    comm_ms: float
    hidden_ms: float
    compute_ms: float

    @property
    def hidden_fraction(self) -> float:
        """The share of communication time hidden behind compute (0 when there is none)."""
        return self.hidden_ms / self.comm_ms if self.comm_ms else 0.0


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlap_of(kernels: list[tuple[str, float, float]], steps: int) -> Overlap:
    """`Overlap` per step of GPU kernels given as (name, start, end) in microseconds over `steps` steps.

    A kernel whose name contains "nccl" is communication; every other kernel is compute.
    """
    comm = [(start, end) for name, start, end in kernels if "nccl" in name.lower()]
    compute = _union([(start, end) for name, start, end in kernels if "nccl" not in name.lower()])
    hidden = 0.0
    for start, end in comm:
        hidden += sum(max(0.0, min(end, c_end) - max(start, c_start)) for c_start, c_end in compute)
    comm_total = sum(end - start for start, end in comm)
    compute_total = sum(end - start for start, end in compute)
    return Overlap(comm_total / steps / 1e3, hidden / steps / 1e3, compute_total / steps / 1e3)


def _profiled_overlap(step: Callable[[], None], steps: int) -> Overlap:
    """Run `step` `steps` times under the profiler and measure communication/compute overlap."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as file:
            events = json.load(file)["traceEvents"]
    kernels = [
        (str(e["name"]), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "kernel"
    ]
    return overlap_of(kernels, steps)


def _compiled(compiler: str, ddp: DDP) -> tuple[Callable[..., Any], Callable[[], int | None]]:
    """`ddp` compiled by `compiler`, and how to read how many graphs it compiled."""
    if compiler == "eager":
        return ddp, lambda: None
    if compiler == "torch.compile":
        return torch.compile(ddp), lambda: None  # the reference (torch's DDPOptimizer splits at buckets)
    import frontend

    # A graph Kiln could not compile would run eagerly and only slow the row down: fail loudly instead.
    options = {"optimize_ddp": compiler == "kiln", "fallback_to_eager": False}
    compiled = frontend.compile(ddp, options=options)
    return compiled, lambda: int(compiled.kiln_context.graphs_compiled)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _train(workload: Workload, model: nn.Module, compiler: str, device: torch.device, args: argparse.Namespace,
           rank: int) -> tuple[list[float], list[float], float, int | None, nn.Module, Overlap | None]:
    """Warm-up and timed steps of one compiler, then `--profile-steps` profiled ones; returns step seconds, the
    seconds until each step returned to Python (before the device finished),
    first-step seconds, graphs, the module and the communication overlap (profiled on CUDA only)."""
    ddp = DDP(copy.deepcopy(model).to(device), device_ids=[device.index] if device.type == "cuda" else None,
              bucket_cap_mb=args.bucket_cap_mb)
    step_fn, graphs = _compiled(compiler, ddp)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own batches, the same for every compiler
    autocast = workload.autocast if device.type == "cuda" else None
    times: list[float] = []
    host_times: list[float] = []
    first = 0.0

    # Every step's batch is drawn before timing starts (drawing a batch of images on the CPU takes
    # longer than a GPU step), each on the device already; the profiled steps reuse the first ones.
    batches = [workload.make_inputs(generator) for _ in range(args.warmup + args.steps)]
    _sync(device)
    next_batch = iter(batches + batches[: args.profile_steps])

    def step() -> None:
        inputs = next(next_batch)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=autocast, enabled=autocast is not None):
            output = step_fn(*inputs)
        output.float().mean().backward()
        optimizer.step()

    for index in range(args.warmup + args.steps):
        _sync(device)
        started = time.perf_counter()
        step()
        returned = time.perf_counter() - started
        _sync(device)
        seconds = time.perf_counter() - started
        if index == 0:
            first = seconds
        if index >= args.warmup:
            times.append(seconds)
            host_times.append(returned)
    overlap = _profiled_overlap(step, args.profile_steps) if args.profile_steps and device.type == "cuda" else None
    return times, host_times, first, graphs(), ddp.module, overlap


@torch.no_grad()
def _max_diff(a: nn.Module, b: nn.Module) -> float:
    return max(float((p - q).abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def bench_model(name: str, device: torch.device, args: argparse.Namespace, rank: int) -> list[Result]:
    """Every compiler of `args.compilers` on model `name`."""
    torch.manual_seed(0)
    workload = MODELS[name].build(BuildContext(device.type))
    model = workload.model.cpu()
    results: list[Result] = []
    reference: nn.Module | None = None
    for compiler in args.compilers:
        dist.barrier()
        times, host_times, first, graphs, trained, overlap = _train(workload, model, compiler, device, args, rank)
        if compiler == "eager":
            reference = trained
        diff = _max_diff(trained, reference) if reference is not None else float("nan")
        results.append(Result(compiler, 1e3 * statistics.median(times), 1e3 * min(times),
                              1e3 * statistics.median(host_times), first, graphs, diff, overlap))
    return results


def _print(name: str, results: list[Result], world: int, device: torch.device) -> None:
    eager = next((r.step_ms for r in results if r.compiler == "eager"), None)
    print(f"\n{name} (DDP over {world} x {device.type}; median of timed steps)")
    print(f"{'compiler':<14} {'step ms':>9} {'best ms':>9} {'host ms':>8} {'speedup':>8} {'first step s':>13} {'graphs':>7} {'max |dparam|':>13}"
          f" {'comm ms':>8} {'hidden':>7} {'compute ms':>11}")
    for r in results:
        speedup = f"{eager / r.step_ms:.2f}x" if eager else "-"
        graphs = "-" if r.graphs is None else str(r.graphs)
        print(f"{r.compiler:<14} {r.step_ms:>9.2f} {r.best_ms:>9.2f} {r.host_ms:>8.2f} {speedup:>8} {r.first_step_s:>13.1f} {graphs:>7} "
              f"{r.max_param_diff:>13.2e}" + _overlap_columns(r.overlap))


def _overlap_columns(overlap: Overlap | None) -> str:
    if overlap is None:
        return f" {'-':>8} {'-':>7} {'-':>11}"
    return f" {overlap.comm_ms:>8.2f} {overlap.hidden_fraction:>7.0%} {overlap.compute_ms:>11.2f}"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, join the process group torchrun set up, run and print (rank 0)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,gpt2", help="comma-separated tools.bench model names")
    parser.add_argument("--compilers", default=",".join(COMPILERS), help=f"comma-separated, of {', '.join(COMPILERS)}")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=20, help="timed steps")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (compiling included)")
    parser.add_argument("--profile-steps", type=int, default=3,
                        help="steps profiled after the timed ones (CUDA): communication time and how much of it compute hid; 0: none")
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP's bucket_cap_mb")
    args = parser.parse_args(argv)
    args.compilers = [c for c in args.compilers.split(",") if c]
    unknown = sorted(set(args.compilers) - set(COMPILERS)) + sorted(set(args.models.split(",")) - set(MODELS))
    if unknown:
        parser.error(f"unknown compiler(s)/model(s): {', '.join(unknown)}")
    if "RANK" not in os.environ:
        parser.error("run under torchrun, e.g. torchrun --nproc-per-node 2 -m tools.bench.ddp")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        for name in args.models.split(","):
            results = bench_model(name, device, args, rank)
            if rank == 0:
                _print(name, results, world, device)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
