"""The boxed calling convention: a compiled graph takes one list of inputs and may empty it.

A `BoxedCallable` (one whose ``boxed_call`` is True; `is_boxed` tells) is called as `fn(args)`; it
may `args.clear()` so that inputs it no longer needs are freed while it runs (the compiled backward
frees saved activations as it goes, as eager's backward does). Other callables are called as
`fn(*args)`. A compiler handing aotgrad a boxed graph declares it so: a class with
``boxed_call = True``, or a function marked with `mark_boxed`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol, TypeGuard

import torch
import torch.fx

from aotgrad.tracing.graph_passes import placeholders


class BoxedCallable(Protocol):
    """A compiled graph taking the boxed convention: ``fn(args)``, one list of inputs it may empty.

    Attributes:
        boxed_call: always True: how a caller tells this convention from ``fn(*args)`` (`is_boxed`).
    """

    boxed_call: Literal[True]

    def __call__(self, args: list[Any], /) -> Any:
        """Run on `args` (which may be emptied); return the outputs."""
        ...


def is_boxed(fn: object) -> TypeGuard[BoxedCallable]:
    """Whether `fn` takes the boxed convention (its ``boxed_call`` is True)."""
    return getattr(fn, "boxed_call", False) is True


def mark_boxed(fn: Callable[[list[Any]], Any]) -> BoxedCallable:
    """`fn`, a function of one list of inputs, marked as taking the boxed convention; returns it."""
    fn.boxed_call = True  # type: ignore[attr-defined]
    return fn  # type: ignore[return-value]


def call_boxed(fn: Callable[..., Any], args: list[Any]) -> Any:
    """Call `fn` on `args`, boxed when it says it takes that convention (`args` may be emptied)."""
    if is_boxed(fn):
        return fn(args)
    return fn(*args)


class BoxedGraph:
    """A GraphModule called boxed: `BoxedGraph(gm)(args)`; `gm` empties `args` as it reads them."""

    boxed_call: Literal[True] = True

    def __init__(self, gm: torch.fx.GraphModule) -> None:
        self.graph_module = gm

    def __call__(self, args: list[Any]) -> Any:
        """Run the graph on `args` (emptied)."""
        return self.graph_module(args)


def boxed_graph_module(gm: torch.fx.GraphModule) -> BoxedGraph:
    """`gm` rewritten to take one list of inputs, which it empties once it has read them, so each
    input is freed after its last use in the graph; called boxed."""
    graph = torch.fx.Graph()
    args = graph.placeholder("args")
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    inputs = placeholders(gm.graph)
    for index, node in enumerate(inputs):
        env[node] = graph.call_function(_item, (args, index))
        env[node].meta = dict(node.meta)
    graph.call_method("clear", (args,))
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            env[node] = graph.node_copy(node, lambda n: env[n])
    return BoxedGraph(torch.fx.GraphModule(gm, graph))


def _item(values: list[Any], index: int) -> Any:
    return values[index]
