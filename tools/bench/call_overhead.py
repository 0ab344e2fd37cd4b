"""Per-call overhead of a compiled module on CPU: eager vs torch.compile vs Kiln.

The module is two tiny Linear layers with a ReLU (4 x 8 inputs), so a call costs almost nothing
but the compiler's bookkeeping (guards, aotgrad's dispatch, the wrapper, kernel launches). Printed
per task (inference under no_grad; training = forward + backward of a sum).

The candidates are timed interleaved: each round runs `--calls` steps of every candidate in turn,
and each candidate's best round counts, so load from other processes on a shared machine hits all
of them alike. ``--clock cpu`` counts this process's CPU time instead of wall time (steadier on a
busy machine; the work is single-threaded). Every candidate runs the same step function.

    python3 -m tools.bench.call_overhead [--calls 1000] [--rounds 7] [--threads 1] [--clock wall|cpu]
    python3 -m tools.bench.call_overhead --stages --clock cpu   # Kiln's call, layer by layer

``--stages`` times each layer of a Kiln call on its own (from the module down to the generated
wrapper; each line includes the ones below it), interleaved with eager, per task.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

import aotgrad


class TwoLayers(nn.Module):
    """Linear(8, 8) -> ReLU -> Linear(8, 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x)))


def _step(fn: Callable[..., Any], x: torch.Tensor, task: str) -> None:
    if task == "inference":
        with torch.no_grad():
            fn(x)
    else:
        fn(x).sum().backward()


def per_call_microseconds(
    candidates: dict[str, Callable[..., Any]],
    x: torch.Tensor,
    task: str,
    calls: int,
    rounds: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Best-of-`rounds` mean time per step of each candidate, in microseconds, timed interleaved."""
    for fn in candidates.values():
        for _ in range(50):
            _step(fn, x, task)
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = clock()
            for _ in range(calls):
                _step(fn, x, task)
            best[name] = min(best[name], (clock() - start) / calls)
    return {name: value * 1e6 for name, value in best.items()}


def kiln_stages(model: nn.Module, compiled: Any, x: torch.Tensor, grad: bool) -> dict[str, Callable[[], Any]]:
    """Each layer of a warm Kiln call, callable on its own (reaches into the packages' internals)."""
    from capture.cache import DEFAULT_CACHE

    entries = [entry for state in DEFAULT_CACHE.states.values() for entry in state.entries]
    L, G = (model, x), type(model).forward.__globals__
    entry = next(e for e in entries if e.check(L, G, None))
    aot = entry.run.__globals__["__graph"]._run  # the first-call guard around aotgrad's AotCallable
    flat = [*aot.state_tensors(), x]
    region = aot._dispatch.lookup(flat).region
    runner = region.compiled.forward  # the first-call guard around the static-shape runner
    boxed = aotgrad.is_boxed(runner)
    stages: dict[str, Callable[[], Any]] = {
        "eager module": lambda: model(x),
        "kiln: whole call (frontend module)": lambda: compiled(x),
        "capture: guard check": lambda: entry.check(L, G, None),
        "capture: cache entry (after guards)": lambda: entry.run(L, G, None),
        "aotgrad: AotCallable": lambda: aot(x),
        "aotgrad: state read": aot.state_tensors,
        "aotgrad: dispatch check": lambda: aot._dispatch.lookup(flat),
        "aotgrad: region (autograd.Function when training)": lambda: region(flat),
        "frontend: graph runner": (lambda: runner(list(flat))) if boxed else (lambda: runner(*flat)),
        "inductor_ir: generated wrapper": lambda: getattr(runner, "compiled", runner)._call(list(flat)),
    }
    if grad:
        stages["eager forward+backward"] = lambda: model(x).sum().backward()
        stages["kiln forward+backward"] = lambda: compiled(x).sum().backward()
    return stages


def print_stages(model: nn.Module, compiled: Any, x: torch.Tensor, calls: int, rounds: int,
                 clock: Callable[[], float]) -> None:
    """Print each layer's microseconds per call, inference (no_grad) and training (grad mode on)."""
    for task in ("inference", "training"):
        with torch.set_grad_enabled(task == "training"):
            stages = kiln_stages(model, compiled, x, task == "training")
            best = dict.fromkeys(stages, float("inf"))
            for fn in stages.values():
                for _ in range(50):
                    fn()
            for _ in range(rounds):
                for name, fn in stages.items():
                    start = clock()
                    for _ in range(calls):
                        fn()
                    best[name] = min(best[name], (clock() - start) / calls)
        for name, value in best.items():
            print(f"{task:10} {name:52} {value * 1e6:9.1f}")


def main() -> None:
    """Print the table: microseconds per step and overhead over eager, per compiler and task."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", "--repeats", type=int, default=7, dest="rounds")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out (faster)")
    parser.add_argument("--stages", action="store_true", help="time each layer of a Kiln call instead")
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    import frontend

    torch.manual_seed(0)
    model = TwoLayers()
    x = torch.randn(4, 8)
    candidates: dict[str, Callable[..., Any]] = {"eager": model}
    if not options.no_torch_compile:
        candidates["torch.compile"] = torch.compile(model)
    candidates["kiln"] = frontend.compile(model)
    with torch.no_grad():
        expected = model(x)
        for name, fn in candidates.items():
            torch.testing.assert_close(fn(x), expected, msg=name)
    clock = time.process_time if options.clock == "cpu" else time.perf_counter
    if options.stages:
        model(x).sum().backward()
        candidates["kiln"](x).sum().backward()  # compile the training entry too
        print_stages(model, candidates["kiln"], x, options.calls, options.rounds, clock)
        return
    print(f"{'task':10} {'compiler':14} {'us/step':>9} {'overhead us':>12} {'x eager':>8}")
    for task in ("inference", "training"):
        times = per_call_microseconds(candidates, x, task, options.calls, options.rounds, clock)
        for name, value in times.items():
            eager = times["eager"]
            print(f"{task:10} {name:14} {value:9.1f} {value - eager:12.1f} {value / eager:8.2f}")


if __name__ == "__main__":
    main()
