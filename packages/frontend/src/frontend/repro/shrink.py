"""Shrinking a failing graph by delta debugging over its nodes.

A candidate is a subset of the graph's operations. Its graph keeps those operations in order; a
value they read from outside the subset becomes an input carrying the value eager computed for it
(numbers are inlined as constants), and the subset's values nothing else in it reads become its
outputs. `shrink` then runs Zeller's ddmin: try each chunk, then each chunk's complement, refining
the chunks until no single operation can be removed while the failure stays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx

OPERATIONS = ("call_function", "call_method", "call_module")

Predicate = Callable[[torch.fx.GraphModule, list[Any]], bool]
"""Whether a candidate graph, called with its inputs, still shows the failure."""


@dataclass(frozen=True)
class Shrunk:
    """The smallest graph found, its inputs, and how many candidates were tried."""

    graph_module: torch.fx.GraphModule
    inputs: list[Any]
    tries: int


def operations(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The nodes that compute something (not inputs, attributes or the output)."""
    return [node for node in gm.graph.nodes if node.op in OPERATIONS]


def eager_values(gm: torch.fx.GraphModule, inputs: list[Any]) -> dict[torch.fx.Node, Any]:
    """Every node's value when `gm` runs eagerly on `inputs`."""
    values: dict[torch.fx.Node, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            result = super().run_node(node)
            values[node] = result
            return result

    with torch.no_grad():
        Recorder(gm).run(*[v.detach() if isinstance(v, torch.Tensor) else v for v in inputs])
    return values


def subgraph(
    gm: torch.fx.GraphModule, keep: Sequence[torch.fx.Node], values: dict[torch.fx.Node, Any]
) -> tuple[torch.fx.GraphModule, list[Any]] | None:
    """The graph of the operations `keep` (in `gm`'s order) and its inputs, or None if it cannot stand alone.

    It cannot when an operation reads a value from outside that is neither a tensor nor a number
    (the tuple of a multi-output op, say), or when none of its outputs is a tensor.
    """
    kept = set(keep)
    outside: dict[torch.fx.Node, Any] = {}  # value read from outside -> placeholder, attribute or constant
    for node in keep:
        for source in node.all_input_nodes:
            if source in kept or source in outside:
                continue
            value = values.get(source)
            if source.op == "get_attr":
                outside[source] = "get_attr"
            elif isinstance(value, torch.Tensor):
                outside[source] = "placeholder"
            elif isinstance(value, (bool, int, float)) or value is None:
                outside[source] = "constant"
            else:
                return None
    sinks = [n for n in keep if not any(user in kept for user in n.users) and isinstance(values.get(n), torch.Tensor)]
    if not sinks:
        return None
    graph = torch.fx.Graph()
    mapping: dict[torch.fx.Node, Any] = {}
    inputs: list[Any] = []
    for source, kind in outside.items():  # placeholders first, as FX requires
        if kind == "placeholder":
            mapping[source] = graph.placeholder(source.name)
            inputs.append(values[source])
    for source, kind in outside.items():
        if kind == "get_attr":
            mapping[source] = graph.get_attr(str(source.target))
        elif kind == "constant":
            mapping[source] = values.get(source)
    for node in keep:
        mapping[node] = graph.node_copy(node, lambda n: mapping[n])
    graph.output(tuple(mapping[n] for n in sinks))
    return torch.fx.GraphModule(gm, graph), inputs


MAX_TRIES = 400
"""Candidates `shrink` tries at most (each may compile kernels); past it, the smallest so far is kept."""


def shrink(gm: torch.fx.GraphModule, inputs: list[Any], fails: Predicate, max_tries: int = MAX_TRIES) -> Shrunk:
    """The smallest subgraph of `gm` for which `fails` still holds (1-minimal over its operations).

    `fails(gm, inputs)` must hold for the whole graph; candidates that cannot stand alone, or for
    which `fails` raises, count as not failing. After `max_tries` candidates the search stops with
    the smallest failing graph found so far (no longer necessarily 1-minimal).
    """
    values = eager_values(gm, inputs)
    order = {node: index for index, node in enumerate(gm.graph.nodes)}
    seen: dict[frozenset[torch.fx.Node], bool] = {}

    def test(candidate: list[torch.fx.Node]) -> bool:
        key = frozenset(candidate)
        if key not in seen and len(seen) >= max_tries:
            return False
        if key not in seen:
            built = subgraph(gm, sorted(candidate, key=order.__getitem__), values)
            try:
                seen[key] = built is not None and fails(*built)
            except Exception:
                seen[key] = False
        return seen[key]

    current = operations(gm)
    if not test(current):
        return Shrunk(gm, inputs, len(seen))
    chunks = 2
    while len(current) >= 2:
        size = -(-len(current) // chunks)
        parts = [current[i : i + size] for i in range(0, len(current), size)]
        for part in parts:
            if test(part):
                current, chunks = part, 2
                break
        else:
            for part in parts:
                rest = [node for node in current if node not in part]
                if test(rest):
                    current, chunks = rest, max(chunks - 1, 2)
                    break
            else:
                if chunks >= len(current):
                    break
                chunks = min(chunks * 2, len(current))
    built = subgraph(gm, sorted(current, key=order.__getitem__), values)
    assert built is not None  # `current` passed `test`, so it stands alone
    return Shrunk(built[0], built[1], len(seen))
