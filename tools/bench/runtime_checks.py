"""The cost of the C++ kernels' runtime checks (indirect indices, integer divisors) on CPU.

Run: ``python3 -m tools.bench.runtime_checks [--threads 1] [--pairs 60]``.

Each workload is traced with make_fx and compiled twice with ``inductor_ir.compile_graph``, with
``CppConfig(runtime_checks=True)`` and ``False``. Calls are timed in interleaved pairs (checked, then
unchecked) and the median of the pairs' ratios is printed with each side's fastest call: a busy
machine slows both sides of a pair alike.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend, CppConfig


def _workloads() -> list[tuple[str, Callable[..., Any], tuple[torch.Tensor, ...]]]:
    generator = torch.Generator().manual_seed(0)
    table = torch.randn(50000, 256, generator=generator)
    ids = torch.randint(0, 50000, (64, 128), generator=generator)
    x = torch.randn(4096, 512, generator=generator)
    positions = torch.randint(0, 512, (4096, 512), generator=generator)
    rows = torch.randint(-4096, 4096, (200000,), generator=generator)
    a = torch.randint(-(10**6), 10**6, (1 << 21,), generator=generator)
    b = torch.randint(1, 1000, (1 << 21,), generator=generator)
    return [
        ("embedding(ids, table).sum(1), 64x128 ids, 50000x256", lambda w, i: F.embedding(i, w).sum(1), (table, ids)),
        ("gather(x, 1, i) * 2, 4096x512", lambda x, i: torch.gather(x, 1, i) * 2, (x, positions)),
        ("x[i] + 1, 200000 rows of 512", lambda x, i: x[i] + 1, (x, rows)),
        ("a // b + a % b, 2M int64", lambda a, b: a // b + a % b, (a, b)),
    ]


def _compile(fn: Callable[..., Any], args: tuple[torch.Tensor, ...], checks: bool) -> Any:
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*args)
    backend = CppBackend(CppConfig.from_env(runtime_checks=checks))
    return inductor_ir.compile_graph(gm, list(args), backends={"cpu": backend})


def main() -> None:
    """Print one line per workload: fastest checked and unchecked call, median ratio of the pairs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--pairs", type=int, default=60)
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    print(f"threads={options.threads}, {options.pairs} interleaved pairs")
    for name, fn, args in _workloads():
        checked, unchecked = _compile(fn, args, True), _compile(fn, args, False)
        expected = fn(*args)
        torch.testing.assert_close(checked(*args), expected)
        torch.testing.assert_close(unchecked(*args), expected)
        for _ in range(5):
            checked(*args)
            unchecked(*args)
        on, off, ratios = [], [], []
        for _ in range(options.pairs):
            start = time.perf_counter()
            checked(*args)
            middle = time.perf_counter()
            unchecked(*args)
            end = time.perf_counter()
            on.append(middle - start)
            off.append(end - middle)
            ratios.append((middle - start) / (end - middle))
        print(
            f"{name:55s} checks {min(on) * 1e3:9.3f} ms  none {min(off) * 1e3:9.3f} ms  "
            f"median ratio {statistics.median(ratios):.3f}"
        )


if __name__ == "__main__":
    main()
