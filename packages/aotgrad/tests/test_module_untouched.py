"""Tracing never changes the caller's module: parameters are swapped for traced values in a copy only.

Another thread may run the module while aotgrad traces it; it must see its real parameters.
"""

from __future__ import annotations

import torch
import torch.fx
from aotgrad_helpers import RecordingCompiler

import aotgrad


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.lin(x).relu())


def _watch(model: _Net) -> list[type]:
    """Record the type of the model's parameter each time its submodule runs (also while traced)."""
    seen: list[type] = []
    model.lin.register_forward_pre_hook(lambda module, args: seen.append(type(model.lin.weight)))
    return seen


def test_tracing_a_graph_module_leaves_its_submodules_alone() -> None:
    torch.manual_seed(0)
    model = _Net()
    gm = torch.fx.symbolic_trace(model)  # its submodules are the model's own objects
    seen = _watch(model)
    x = torch.randn(2, 4, requires_grad=True)
    compiled = aotgrad.aot_graph(gm, [x], fw_compiler=RecordingCompiler())
    assert seen and all(kind is torch.nn.Parameter for kind in seen)
    torch.testing.assert_close(compiled(x), model(x))


def test_tracing_a_module_leaves_it_alone() -> None:
    torch.manual_seed(0)
    model = _Net()
    seen = _watch(model)
    compiled = aotgrad.aot_module(model, fw_compiler=RecordingCompiler())
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    assert seen and all(kind is torch.nn.Parameter for kind in seen)
