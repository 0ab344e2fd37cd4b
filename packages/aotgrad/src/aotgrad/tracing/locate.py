"""Running an FX graph while remembering which node runs, to point errors at the user's line."""

from __future__ import annotations

from typing import Any, TypeVar

import torch
import torch.fx

M = TypeVar("M", bound=torch.nn.Module)


def detached_copy(module: M) -> M:
    """A new object of each module in `module`'s tree, sharing every tensor and attribute value, with
    registration dicts (`_parameters`, `_buffers`, `_modules`) of its own.

    `torch.func.functional_call` on the copy swaps tensors in the copy only: the original stays
    usable by other threads while a trace runs. Submodules shared inside the tree stay shared.
    """
    copies: dict[int, torch.nn.Module] = {}

    def copy(original: torch.nn.Module) -> torch.nn.Module:
        known = copies.get(id(original))
        if known is not None:
            return known
        new = copies[id(original)] = object.__new__(type(original))
        state = dict(original.__dict__)
        for slot in ("_parameters", "_buffers"):
            if slot in state:
                state[slot] = type(state[slot])(state[slot])
        if "_modules" in state:
            children = state["_modules"]
            state["_modules"] = type(children)((name, None if child is None else copy(child))
                                               for name, child in children.items())
        object.__setattr__(new, "__dict__", state)
        return new

    return copy(module)  # type: ignore[return-value]


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
