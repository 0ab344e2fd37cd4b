"""Shared test helpers: a recording backend and graph summaries."""

from __future__ import annotations

from typing import Any

import torch


class RecordingBackend:
    """A backend that keeps every graph it is given and runs it as is."""

    def __init__(self) -> None:
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
        self.graphs.append(gm)
        for value in example_inputs:
            assert isinstance(value, torch.Tensor)
        return gm.forward

    @property
    def count(self) -> int:
        return len(self.graphs)


def ops(gm: torch.fx.GraphModule) -> list[Any]:
    """Call targets of a graph, in order."""
    return [n.target for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


def placeholders(gm: torch.fx.GraphModule) -> list[str]:
    """Placeholder names of a graph, in order."""
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]
