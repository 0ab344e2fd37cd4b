"""Dynamic shapes: a varying-sequence-length workload, and the steady-state cost of dynamic kernels.

A pre-norm transformer block (layer norm, 4-head attention, GELU MLP; width 64, batch 4) runs in
inference on CPU with 2 threads, on sequence lengths 7, 64, 100, 128, 511, 512, each repeated.
Compared side by side, each from fresh caches (Kiln's and TorchInductor's on-disk caches point
into a new temporary folder):

* eager PyTorch;
* ``torch.compile`` (default: static, then automatic dynamic) and ``torch.compile(dynamic=True)``,
  the reference;
* Kiln ``frontend.compile`` (default: static, then automatic dynamic) and ``dynamic=True``.

Table 1: total wall time of the whole workload including every compile, the number of graphs
compiled, and the time of a second pass over the same workload (all compiled). Table 2: the cost
of dynamism: ms per call at one size for a static compile vs a dynamic one.

    python3 -m tools.bench.dynamic_shapes [--repeats 3] [--width 64] [--steady-calls 20]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import types
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

LENGTHS = (7, 64, 100, 128, 511, 512)


class Block(nn.Module):
    """A pre-norm transformer block whose sequence length is read from the input."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, width))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def fresh_copy(model: Block, tag: str) -> Block:
    """A copy of `model` whose forward has its own code object.

    TorchDynamo (and capture) keep compiled entries per code object: compiled side by side, a static
    and a dynamic compile of the same forward would share (and hit) each other's entries.
    """
    forward = Block.forward
    code = forward.__code__.replace(co_name=f"forward_{tag}")
    cls = type(f"Block_{tag}", (Block,), {"forward": types.FunctionType(code, forward.__globals__, code.co_name)})
    copy = cls.__new__(cls)
    copy.__dict__.update(deepcopy(model).__dict__)
    return copy


@dataclass
class Candidate:
    """One way of running the block: how to build it fresh and how to count its compiles."""

    name: str
    build: Callable[[nn.Module], Callable[..., Any]]
    compiles: Callable[[Callable[..., Any]], int]


def _torch_compile(dynamic: bool | None) -> Callable[[nn.Module], Callable[..., Any]]:
    def build(model: nn.Module) -> Callable[..., Any]:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()
        return torch.compile(model, dynamic=dynamic)  # the reference we are measured against

    return build


def _torch_compiles(_: Callable[..., Any]) -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def _kiln(dynamic: bool | None) -> Callable[[nn.Module], Callable[..., Any]]:
    def build(model: nn.Module) -> Callable[..., Any]:
        import frontend

        frontend.reset()
        return frontend.compile(model, dynamic=dynamic, options={"fallback_to_eager": False})  # type: ignore[no-any-return]

    return build


def _kiln_compiles(compiled: Callable[..., Any]) -> int:
    return int(compiled.kiln_context.graphs_compiled)  # type: ignore[attr-defined]


CANDIDATES = [
    Candidate("eager", lambda model: model, lambda _: 0),
    Candidate("torch.compile (default)", _torch_compile(None), _torch_compiles),
    Candidate("torch.compile(dynamic=True)", _torch_compile(True), _torch_compiles),
    Candidate("Kiln (default)", _kiln(None), _kiln_compiles),
    Candidate("Kiln dynamic=True", _kiln(True), _kiln_compiles),
]


def workload(lengths: tuple[int, ...], repeats: int, batch: int, width: int) -> list[torch.Tensor]:
    """The inputs, in call order: every length once, `repeats` times over (fresh random values)."""
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(batch, seq, width, generator=generator) for _ in range(repeats) for seq in lengths]


def run_workload(fn: Callable[..., Any], inputs: list[torch.Tensor], model: nn.Module) -> float:
    """Seconds to run `fn` over `inputs` (checking each result against eager)."""
    started = time.perf_counter()
    outputs = [fn(x) for x in inputs]
    seconds = time.perf_counter() - started
    for x, out in zip(inputs, outputs, strict=True):
        torch.testing.assert_close(out, model(x), rtol=1e-3, atol=1e-3)
    return seconds


def steady_ms(candidates: dict[str, Callable[..., Any]], x: torch.Tensor, calls: int, rounds: int = 5) -> dict[str, float]:
    """Per candidate, the best over `rounds` of the mean milliseconds per call.

    Rounds interleave the candidates, so load from other processes on a shared machine hits all
    of them alike.
    """
    for fn in candidates.values():
        fn(x)
    best = dict.fromkeys(candidates, float("inf"))
    for _ in range(rounds):
        for name, fn in candidates.items():
            started = time.perf_counter()
            for _ in range(calls):
                fn(x)
            best[name] = min(best[name], (time.perf_counter() - started) / calls * 1e3)
    return best


def main() -> None:
    """Print both markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="passes over the lengths in the workload")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steady-calls", type=int, default=20)
    parser.add_argument("--steady-length", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    options = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="kiln-dynamic-bench-")
    os.environ["KILN_CACHE_DIR"] = os.path.join(cache, "kiln")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
    torch.set_num_threads(options.threads)
    torch.manual_seed(0)
    model = Block(options.width, options.heads).eval()
    inputs = workload(LENGTHS, options.repeats, options.batch, options.width)
    print(f"transformer block: width {options.width}, {options.heads} heads, batch {options.batch}; "
          f"sequence lengths {', '.join(map(str, LENGTHS))} x {options.repeats}; CPU, {options.threads} threads; "
          "inference\n")
    print("| how | graphs compiled | first pass incl. compiles (s) | second pass (s) |")
    print("| --- | ---: | ---: | ---: |")
    with torch.no_grad():
        for candidate in CANDIDATES:
            fn = candidate.build(model)
            first = run_workload(fn, inputs, model)
            second = run_workload(fn, inputs, model)
            print(f"| {candidate.name} | {candidate.compiles(fn)} | {first:.2f} | {second:.2f} |", flush=True)
        x = torch.randn(options.batch, options.steady_length, options.width)
        print(f"\ncost of dynamism: ms per call at sequence length {options.steady_length} "
              f"(best of 5 interleaved rounds of {options.steady_calls} calls)\n")
        torch._dynamo.reset()
        compiled = {
            "torch.compile static": torch.compile(fresh_copy(model, "static"), dynamic=False),
            "torch.compile dynamic": torch.compile(fresh_copy(model, "dynamic"), dynamic=True),
            "Kiln static": _kiln(False)(model),
        }
        compiled["Kiln static"](x)  # compile before the next frontend.reset()
        compiled["Kiln dynamic"] = _kiln(True)(model)
        compiled["eager"] = model
        times = steady_ms(compiled, x, options.steady_calls)
        print("| compiler | static | dynamic | dynamic / static |")
        print("| --- | ---: | ---: | ---: |")
        for label in ("torch.compile", "Kiln"):
            static, dynamic = times[f"{label} static"], times[f"{label} dynamic"]
            print(f"| {label} | {static:.2f} | {dynamic:.2f} | {dynamic / static:.2f} |")
        print(f"| eager | {times['eager']:.2f} | | |")

if __name__ == "__main__":
    main()
