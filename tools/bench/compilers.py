"""Adapters that turn a module into a compiled callable: torch.compile (the reference) and Kiln.

torch.compile is called here only as the reference Kiln is measured against. Kiln is reached through
its public entry point, `frontend.compile(model, backend="inductor", mode=...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tools.bench.config import CompilerSpec

Compiled = Callable[..., Any]


def compile_model(spec: CompilerSpec, model: torch.nn.Module) -> Compiled:
    """`model` compiled by `spec`'s compiler (compilation itself may happen lazily, on the first call)."""
    if spec.kind == "eager":
        return model
    if spec.kind == "torch":
        return torch.compile(model, mode=spec.mode)
    if spec.kind == "kiln":
        import frontend

        return frontend.compile(model, backend="inductor", mode=spec.mode)
    raise ValueError(f"unknown compiler kind {spec.kind!r}")


def before_each_call(spec: CompilerSpec) -> Callable[[], None] | None:
    """What to run before every call of a compiled model: torch's CUDA-graph step marker in reduce-overhead mode."""
    if spec.kind == "torch" and spec.mode == "reduce-overhead":
        return torch.compiler.cudagraph_mark_step_begin
    return None


class _StartupProbe(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2.0 + 1.0


def startup_probe(spec: CompilerSpec, device: str) -> None:
    """Compile and run a tiny module once, so a compiler's one-time process start-up (imports, worker
    pools, toolchain checks) is measured on its own and not charged to the first model compiled."""
    if spec.kind == "eager":
        return
    probe = compile_model(spec, _StartupProbe())
    x = torch.randn(64, device=device)
    result = probe(x)
    expected = torch.sin(x) * 2.0 + 1.0
    if not torch.allclose(result, expected, rtol=1e-4, atol=1e-5):
        raise AssertionError("start-up probe: compiled sin(x) * 2 + 1 differs from eager")
