"""Compiling pauses Python's garbage collector and leaves it as the user had it."""

from __future__ import annotations

import gc
from typing import Any

import pytest
import torch

import frontend
import inductor_ir


def _fn(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x * 2 + 1).sum(0)


@pytest.mark.parametrize("enabled", [True, False])
def test_collector_paused_while_compiling_and_restored(monkeypatch: pytest.MonkeyPatch, enabled: bool) -> None:
    seen: list[bool] = []
    real = inductor_ir.compile_graph

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(inductor_ir, "compile_graph", spy)
    original = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        # graph_cache off: a graph loaded from the cache is not compiled at all
        compiled = frontend.compile(_fn, backend="inductor", options={"graph_cache": False})
        x = torch.randn(8, 5)
        torch.testing.assert_close(compiled(x), _fn(x))
        assert seen == [False]
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if original else gc.disable)()
