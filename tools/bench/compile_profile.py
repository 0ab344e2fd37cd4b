"""Where Kiln's cold compile time goes, per benchmark model: stage seconds and the hottest functions.

    python3 -m tools.bench.compile_profile --device cuda --model mobilenet_v2 --task training

Builds the model as the benchmark does, points Kiln's and Triton's caches at a fresh folder (a cold
compile), then times `frontend.compile(model)` plus the first call: the total, `frontend.compile_times()`
per stage (capture, aotgrad, lowering, scheduling, codegen, compile), the time outside those stages
(the first call's kernel launches and autotuning), and with `--profile` the functions with the most
cumulative time (cProfile; the compile then runs slower).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
import time

import torch

from tools.bench.registry import BuildContext
from tools.bench.steps import TaskRunner
from tools.bench.suite import MODELS


def profile_compile(model_name: str, task: str, device: str, *, profile: bool, top: int) -> None:
    """Compile `model_name` for `task` on `device` from empty caches and print where the time went."""
    import frontend
    from frontend.stats import PROCESS_TIMES

    spec = MODELS[model_name]
    torch.manual_seed(0)
    workload = spec.build(BuildContext(device))
    runner = TaskRunner(workload, task, device, 0)
    inputs = runner.prepare(workload.model, workload.make_inputs(torch.Generator().manual_seed(1)))
    runner.step(workload.model, workload.model, inputs)  # lazy library start-up is not compile time
    PROCESS_TIMES.reset()
    profiler = cProfile.Profile() if profile else None
    if device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    compiled = frontend.compile(workload.model, backend="inductor")
    runner.step(compiled, workload.model, inputs)
    if device == "cuda":
        torch.cuda.synchronize()
    if profiler is not None:
        profiler.disable()
    total = time.perf_counter() - started
    print(f"\n== {model_name} {task} on {device}: first call {total:.2f} s")
    print(frontend.compile_times())
    print(f"{'outside stages':<12} {total - PROCESS_TIMES.total():>10.4f}  (first-call launches, autotuning, guards)")
    if profiler is not None:
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python3 -m tools.bench.compile_profile", description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--model", action="append", required=True, help="a benchmark model name (repeatable)")
    parser.add_argument("--task", choices=("inference", "training"), default="training")
    parser.add_argument("--profile", action="store_true", help="also print cProfile's hottest functions")
    parser.add_argument("--top", type=int, default=40, help="how many functions to list")
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="kiln-compile-profile-")
    os.environ.setdefault("KILN_CACHE_DIR", os.path.join(scratch, "kiln"))
    os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(scratch, "triton"))
    for name in args.model:
        profile_compile(name, args.task, args.device, profile=args.profile, top=args.top)


if __name__ == "__main__":
    main()
