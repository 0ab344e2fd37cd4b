"""aotgrad's memory benchmark: bytes saved for backward under save_all and min_cut, next to eager.

For an MLP and a transformer block (training step: forward + backward) it prints
  * saved for backward: the activation bytes each partitioner saves (saved inputs and views of
    inputs excluded, they hold no new memory), and eager's saved activations (autograd's
    saved-tensor hooks, same exclusions);
  * peak live tensor memory during a step (tracked op by op with a dispatch mode, so it works on the
    CPU; on a GPU, torch.cuda.max_memory_allocated is reported as well);
  * best-of-N step time of eager and of aotgrad with eager compilers (aot_eager) per partitioner
    (best, not median: the CPU machines this runs on are shared, and the minimum is the least noisy).

Run: python3 tools/bench/aotgrad_memory.py [--quick] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

import aotgrad


class TransformerBlock(torch.nn.Module):
    """Pre-norm attention + GELU MLP with dropout, the shape of a GPT block."""

    def __init__(self, dim: int, heads: int, p: float = 0.1) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)))))


def mlp(width: int) -> torch.nn.Module:
    """A four-layer GELU MLP."""
    layers: list[torch.nn.Module] = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    return torch.nn.Sequential(*layers)


class PeakTensorMemory(TorchDispatchMode):
    """Tracks the bytes of live tensor storages produced by ops, and their peak."""

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self._refs: dict[int, int] = {}

    def _release(self, key: int, nbytes: int) -> None:
        self._refs[key] -= 1
        if self._refs[key] == 0:
            del self._refs[key]
            self.live -= nbytes

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key, nbytes = storage.data_ptr(), storage.nbytes()
                if key not in self._refs:
                    self._refs[key] = 0
                    self.live += nbytes
                    self.peak = max(self.peak, self.live)
                self._refs[key] += 1
                weakref.finalize(t, self._release, key, nbytes)
        return out


def eager_saved_bytes(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Activation bytes eager autograd saves for backward (parameters and the input excluded)."""
    exclude = {p.untyped_storage().data_ptr() for p in model.parameters()} | {x.untyped_storage().data_ptr()}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in exclude:
            seen[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x).sum().backward()
    return sum(seen.values())


def step(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> None:
    """One training step: forward, backward (gradients accumulate; no optimizer)."""
    fn(x).sum().backward()


def measure(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, repeats: int) -> tuple[float, int, int]:
    """(best step ms, peak live tensor bytes, CUDA peak bytes or 0)."""
    step(fn, x)  # warm up (and compile)
    tracker = PeakTensorMemory()
    with tracker:
        step(fn, x)
    cuda_peak = 0
    if x.is_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step(fn, x)
        torch.cuda.synchronize()
        cuda_peak = torch.cuda.max_memory_allocated()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(fn, x)
        if x.is_cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return min(times), tracker.peak, cuda_peak


def run(name: str, model: torch.nn.Module, x: torch.Tensor, repeats: int) -> list[str]:
    """Rows of the table for one model."""
    report = aotgrad.saved_bytes_report(model, [x])
    rows = []
    eager_ms, eager_peak, eager_cuda = measure(model, x, repeats)
    rows.append((name, "eager", eager_saved_bytes(model, x), eager_peak, eager_cuda, eager_ms))
    for partition, saved in ((aotgrad.save_all, report.save_all), (aotgrad.min_cut, report.min_cut)):
        compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.eager_compiler, partition=partition)
        ms, peak, cuda = measure(compiled, x, repeats)
        rows.append((name, f"aot_eager+{partition.__name__}", saved.activation_bytes, peak, cuda, ms))
    mb = 1 / (1 << 20)
    return [
        f"| {m} | {how} | {s * mb:8.2f} | {p * mb:8.2f} | {(f'{c * mb:8.2f}' if c else 'n/a')} | {ms:8.2f} |"
        for m, how, s, p, c, ms in rows
    ]


def main() -> None:
    """Parse arguments, run both models, print a markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes, few repeats")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device(args.device)
    repeats = 3 if args.quick else 10
    batch, seq, dim = (4, 64, 128) if args.quick else (8, 128, 256)
    print(f"device={device} torch={torch.__version__} batch={batch} seq={seq} dim={dim}")
    print("| model | how | saved for backward (MiB) | peak live tensors (MiB) | CUDA peak (MiB) | step (ms) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    block = TransformerBlock(dim, heads=8).to(device).train()
    lines = run("transformer block", block, torch.randn(batch, seq, dim, device=device, requires_grad=True), repeats)
    lines += run("MLP", mlp(4 * dim).to(device), torch.randn(batch * seq, 4 * dim, device=device), repeats)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
