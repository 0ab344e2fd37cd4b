"""Running an FX graph while remembering which node runs, to point errors at the user's line."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx


class LocatingModule(torch.nn.Module):
    """Wraps a GraphModule so that each run records the node being executed in `current`.

    Its parameters and buffers are the graph module's, under the prefix ``"graph."``, so it can be
    called with `torch.func.functional_call`.
    """

    def __init__(self, graph_module: torch.fx.GraphModule) -> None:
        super().__init__()
        self.graph = graph_module
        self.current: torch.fx.Node | None = None

    def forward(self, *args: Any) -> Any:
        """Run the graph node by node."""
        owner = self

        class _Interpreter(torch.fx.Interpreter):
            def run_node(self, n: torch.fx.Node) -> Any:
                owner.current = n
                return super().run_node(n)

        result = _Interpreter(self.graph).run(*args)
        self.current = None
        return result
