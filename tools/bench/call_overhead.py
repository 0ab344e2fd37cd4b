"""Per-call overhead of a compiled module on CPU: eager vs torch.compile vs Kiln.

The module is two tiny Linear layers with a ReLU (4 x 8 inputs), so a call costs almost nothing
but the compiler's bookkeeping (guards, aotgrad's dispatch, the wrapper, kernel launches). Printed
per task (inference under no_grad; training = forward + backward of a sum).

    python3 -m tools.bench.call_overhead [--calls 2000] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


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


def per_call_microseconds(fn: Callable[..., Any], x: torch.Tensor, task: str, calls: int, repeats: int) -> float:
    """Best-of-`repeats` mean time per step, in microseconds."""
    for _ in range(50):
        _step(fn, x, task)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            _step(fn, x, task)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    """Print the table: microseconds per step and overhead over eager, per compiler and task."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    import frontend

    torch.manual_seed(0)
    model = TwoLayers()
    x = torch.randn(4, 8)
    candidates: dict[str, Callable[..., Any]] = {
        "eager": model,
        "torch.compile": torch.compile(model),
        "kiln": frontend.compile(model),
    }
    with torch.no_grad():
        expected = model(x)
        for name, fn in candidates.items():
            torch.testing.assert_close(fn(x), expected, msg=name)
    print(f"{'task':10} {'compiler':14} {'us/step':>9} {'overhead us':>12}")
    for task in ("inference", "training"):
        times = {name: per_call_microseconds(fn, x, task, options.calls, options.repeats) for name, fn in candidates.items()}
        for name, value in times.items():
            print(f"{task:10} {name:14} {value:9.1f} {value - times['eager']:12.1f}")


if __name__ == "__main__":
    main()
