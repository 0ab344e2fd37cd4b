"""Per-call overhead of a cached compiled function: eager vs torch.compile(backend="eager") vs capture.

The function takes 10 tiny tensors and adds them up; after warm-up every call hits the cache, so
the difference to eager is the cost of the guard checks and the dispatch to the compiled graph.

    python3 tools/bench/capture_overhead.py [--calls 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

import capture


def ten_inputs(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9):  # type: ignore[no-untyped-def]
    """The benchmarked function: 9 additions over 10 tiny tensors."""
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return gm.forward


def per_call_microseconds(fn: Callable[..., Any], inputs: list[torch.Tensor], calls: int, repeats: int) -> float:
    """Best-of-`repeats` mean time per call, in microseconds."""
    for _ in range(200):
        fn(*inputs)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn(*inputs)
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    """Print the side-by-side table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    torch.manual_seed(0)
    inputs = [torch.randn(4) for _ in range(10)]
    candidates: dict[str, Callable[..., Any]] = {
        "eager": ten_inputs,
        'torch.compile(backend="eager")': torch.compile(ten_inputs, backend="eager"),
        "capture.optimize(eager)": capture.optimize(_eager_backend)(ten_inputs),
    }
    expected = ten_inputs(*inputs)
    for name, fn in candidates.items():
        torch.testing.assert_close(fn(*inputs), expected, msg=name)
    times = {name: per_call_microseconds(fn, inputs, options.calls, options.repeats) for name, fn in candidates.items()}
    eager = times["eager"]
    print(f"{'variant':34} {'us/call':>9} {'overhead us':>12} {'x eager':>8}")
    for name, value in times.items():
        print(f"{name:34} {value:9.2f} {value - eager:12.2f} {value / eager:8.2f}")
    ours = times["capture.optimize(eager)"] - eager
    theirs = times['torch.compile(backend="eager")'] - eager
    print(f"capture overhead / torch.compile overhead: {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
