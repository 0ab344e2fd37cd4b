"""Shared helpers for aotgrad's tests (made importable by conftest.py): models, recording compilers."""

from __future__ import annotations

from collections.abc import Callable
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

