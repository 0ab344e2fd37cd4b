"""Small clean-ups on traced ATen graphs: drop no-op aliases and dead code, keep random ops."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

aten = torch.ops.aten


def is_random(node: torch.fx.Node) -> bool:
    """True when the node calls a random ATen op (its result depends on the RNG state)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags


def remove_aliases(graph: torch.fx.Graph) -> None:
    """Replace `aten.alias(x)` by `x`: in a functional graph an alias is the same value."""
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is aten.alias.default:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)


def eliminate_dead_code(graph: torch.fx.Graph) -> None:
    """Remove nodes nobody uses, except random ops (dropping one would shift eager's RNG stream)."""
    for node in reversed(list(graph.nodes)):
        if node.op in ("placeholder", "output") or node.users:
            continue
        if is_random(node):
            continue
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            continue
        graph.erase_node(node)


def clean(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Apply the clean-ups above, lint the graph and regenerate its code."""
    remove_aliases(gm.graph)
    eliminate_dead_code(gm.graph)
    gm.graph.lint()
    gm.recompile()
    return gm


def output_node(graph: torch.fx.Graph) -> torch.fx.Node:
    """The graph's single `output` node."""
    for node in reversed(graph.nodes):
        if node.op == "output":
            return node
    raise ValueError("graph has no output node")


def output_values(graph: torch.fx.Graph) -> list[Any]:
    """The values the graph returns (its output node's tuple), as a list."""
    values = output_node(graph).args[0]
    assert isinstance(values, (tuple, list)), "aotgrad graphs return a tuple"
    return list(values)


def placeholders(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The graph's placeholder nodes, in order."""
    return [node for node in graph.nodes if node.op == "placeholder"]
