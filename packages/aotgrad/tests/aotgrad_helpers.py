"""Shared helpers for aotgrad's tests (made importable by conftest.py): models, recording compilers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

import aotgrad


class RecordingCompiler:
    """A compiler that runs graphs as they are and keeps them for inspection."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.graphs.append(gm)
        return gm


class TransformerBlock(torch.nn.Module):
    """Pre-norm attention + GELU MLP, with dropout: the shape of a GPT block."""

    def __init__(self, dim: int = 32, heads: int = 4, p: float = 0.1) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 4 * dim)
        self.fc2 = torch.nn.Linear(4 * dim, dim)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q = q.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5, dim=-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x)))))


def trace_block(block: torch.nn.Module) -> torch.fx.GraphModule:
    """symbolic_trace with shapes read at run time (x.shape is traced, not specialized)."""
    return torch.fx.symbolic_trace(block)


def strict() -> aotgrad.AotConfig:
    """Raise instead of falling back, so a tracing bug fails the test."""
    return aotgrad.AotConfig(fallback_to_eager=False)


def assert_close_grads(actual: list[torch.Tensor | None], expected: list[torch.Tensor | None], **tol: Any) -> None:
    """Gradients agree one by one (None where eager has None)."""
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        if e is None:
            assert a is None or torch.count_nonzero(a) == 0
        else:
            assert a is not None
            torch.testing.assert_close(a, e, **tol)


# --- the differential fuzzer's checks (test_fuzz_regressions.py, test_overlapping_writes.py) -----


def seeded_leaf(seed: int, shape: tuple[int, ...], dtype: torch.dtype = torch.float32, grad: bool = False) -> torch.Tensor:
    """A tensor from its own seed: normal floats, integers in [-9, 9]; a leaf that requires grad if `grad`."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        t = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    else:
        t = torch.randint(-9, 10, shape, generator=g).to(dtype)
    return t.requires_grad_(grad)


def run_recorded(fn: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], no_grad: bool) -> dict[str, Any]:
    """Outputs, inputs after the call, requires_grad flags and the gradients of the grad leaves."""
    inputs = list(make_inputs())
    leaves = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad and x.is_leaf]
    with torch.no_grad() if no_grad else torch.enable_grad():
        outputs = fn(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    result: dict[str, Any] = {
        "outputs": [o.detach().clone() for o in outputs],
        "inputs": [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs],
        "requires_grad": [o.requires_grad for o in outputs] + [x.requires_grad for x in inputs if isinstance(x, torch.Tensor)],
    }
    differentiable = [o for o in outputs if o.requires_grad]
    if differentiable and leaves:
        cotangents = [torch.linspace(-1, 2, o.numel(), dtype=torch.float64).reshape(o.shape).to(o.dtype) for o in differentiable]
        grads = torch.autograd.grad(differentiable, leaves, cotangents, allow_unused=True)
        result["grads"] = [None if g is None else g.clone() for g in grads]
    return result


def assert_same_results(expected: dict[str, Any], actual: dict[str, Any]) -> None:
    assert expected.keys() == actual.keys()
    assert expected["requires_grad"] == actual["requires_grad"]
    for key in ("outputs", "inputs", "grads"):
        for want, got in zip(expected.get(key, []), actual.get(key, [])):
            if want is None or got is None:
                present = got if want is None else want
                assert present is None or not present.count_nonzero(), key
                continue
            torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m, k=key: f"{k}: {m}")


def check_against_eager(fn: Callable[..., Any], make_inputs: Callable[[], Sequence[Any]], *, no_grad: bool = False) -> None:
    """`fn` compiled by aotgrad gives eager's outputs, input updates, flags and gradients."""
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    assert_same_results(run_recorded(fn, make_inputs, no_grad), run_recorded(compiled, make_inputs, no_grad))
