"""Cut a joint graph into a forward and a backward graph, given the values to save between them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sympy
import torch
import torch.fx
from torch.fx._lazy_graph_module import _make_graph_module
from torch.fx.experimental.symbolic_shapes import free_symbols

from aotgrad.tracing.graph_passes import is_runtime_assert, output_values, placeholders
from aotgrad.tracing.joint import JointGraph


class JointRegions:
    """The parts of a joint graph a partitioner reasons about."""

    def __init__(self, joint: JointGraph) -> None:
        graph = joint.gm.graph
        self.graph = graph
        inputs = placeholders(graph)
        self.primals: list[torch.fx.Node] = inputs[: joint.num_primals]
        self.tangents: list[torch.fx.Node] = inputs[joint.num_primals :]
        outputs = output_values(graph)
        self.fwd_outputs: list[Any] = outputs[: joint.num_fwd_outputs]
        self.grads: list[Any] = outputs[joint.num_fwd_outputs :]
        self.tangent_dependent: set[torch.fx.Node] = set(self.tangents)
        for node in graph.nodes:
            if node.op != "output" and any(a in self.tangent_dependent for a in node.all_input_nodes):
                self.tangent_dependent.add(node)
        # Checks on forward values (`torch._check` on an `item()`): the forward runs them, as eager does.
        self.fwd_asserts: list[torch.fx.Node] = [
            n for n in graph.nodes if is_runtime_assert(n) and n not in self.tangent_dependent
        ]

    def backward_reads(self) -> list[torch.fx.Node]:
        """Forward-side values the backward reads directly (what `save_all` saves), in graph order."""
        wanted: set[torch.fx.Node] = set()
        for node in self.tangent_dependent:
            wanted.update(a for a in node.all_input_nodes if a not in self.tangent_dependent)
        wanted.update(g for g in self.grads if isinstance(g, torch.fx.Node) and g not in self.tangent_dependent)
        return [n for n in self.graph.nodes if n in wanted]


def _closure(roots: Iterable[object], stop: set[torch.fx.Node]) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = [r for r in roots if isinstance(r, torch.fx.Node)]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node not in stop:
            stack.extend(node.all_input_nodes)
    return seen


def _on_demand_order(
    source: torch.fx.Graph, keep: set[torch.fx.Node], anchors: set[torch.fx.Node]
) -> list[torch.fx.Node]:
    """`keep` in an order where each non-anchor node comes right before its first user, so that
    values recomputed in the backward are made when needed, not all at its start."""
    order: list[torch.fx.Node] = []
    done: set[torch.fx.Node] = set()
    for root in [n for n in source.nodes if n in anchors and n in keep] + [n for n in source.nodes if n in keep]:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in done:
                continue
            if expanded:
                done.add(node)
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((a, False) for a in reversed(node.all_input_nodes) if a in keep and a not in done)
    return order


def _copy_graph(
    source: torch.fx.Graph,
    inputs: Sequence[torch.fx.Node],
    keep: set[torch.fx.Node],
    outputs: Sequence[Any],
    order: Sequence[torch.fx.Node] | None = None,
) -> torch.fx.Graph:
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in inputs:
        env[node] = graph.placeholder(node.name)
        env[node].meta = dict(node.meta)
    for node in order if order is not None else source.nodes:
        if node in keep and node not in env and node.op != "output":
            if node.op == "placeholder":
                raise AssertionError(f"partition needs input `{node.name}` that it does not receive")
            env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[o] if isinstance(o, torch.fx.Node) else o for o in outputs))
    return graph


def bound_symbols(values: Iterable[Any]) -> set[sympy.Symbol]:
    """The size symbols a graph taking `values` can read directly: plain-symbol sizes, strides and
    storage offsets of its tensors, and its plain-symbol SymInts."""
    bound: set[sympy.Symbol] = set()
    for value in values:
        if isinstance(value, torch.Tensor):
            parts: list[Any] = [*value.shape, *value.stride(), value.storage_offset()]
        else:
            parts = [value]
        for part in parts:
            expr = getattr(getattr(part, "node", None), "expr", None)
            if isinstance(expr, sympy.Symbol):
                bound.add(expr)
    return bound


def _size_symbols_to_save(
    graph: torch.fx.Graph, regions: JointRegions, saved: Sequence[torch.fx.Node]
) -> list[torch.fx.Node]:
    """SymInt nodes to save so that the backward can bind every size symbol its inputs use.

    A backward taking only ``(s0 + 2) // 3`` (a saved SymInt) and tangents of that size cannot
    recover ``s0``: its code generator reads each symbol from one input's size (or a plain SymInt
    input). For each such symbol, the size of a primal where it appears plainly is saved (a
    ``sym_size`` node added after that primal).
    """
    inputs = [*saved, *regions.tangents]
    values = [n.meta.get("val") for n in inputs]
    used: set[sympy.Symbol] = set()
    for value in values:
        if isinstance(value, (torch.Tensor, torch.SymInt)):
            used |= {s for s in free_symbols(value) if isinstance(s, sympy.Symbol)}
    missing = used - bound_symbols(values)
    added: list[torch.fx.Node] = []
    for primal in regions.primals:
        value = primal.meta.get("val")
        if not missing or not isinstance(value, torch.Tensor):
            continue
        for dim, size in enumerate(value.shape):
            expr = getattr(getattr(size, "node", None), "expr", None)
            if expr in missing:
                with graph.inserting_after(primal):
                    node = graph.call_function(torch.ops.aten.sym_size.int, (primal, dim))
                node.meta["val"] = size
                added.append(node)
                missing.discard(expr)
    return added


def split_joint(
    joint: JointGraph, saved: Sequence[torch.fx.Node]
) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """Build `(forward, backward)` from a joint graph and the values saved for the backward.

    The forward maps primals to `(*forward outputs, *saved)`; the backward maps
    `(*saved, *tangents)` to the gradients, recomputing whatever else it needs from `saved`.
    A primal the backward would need without it being saved is added to `saved`.
    """
    regions = JointRegions(joint)
    graph = joint.gm.graph
    saved_list = list(dict.fromkeys(saved))
    while True:
        stop = set(saved_list) | set(regions.tangents)
        backward_keep = _closure(regions.grads, stop)
        missing = [p for p in regions.primals if p in backward_keep and p not in stop]
        if not missing:
            break
        saved_list += missing
    saved_list += _size_symbols_to_save(graph, regions, saved_list)
    forward_keep = _closure([*regions.fwd_outputs, *saved_list, *regions.fwd_asserts], set(regions.primals))
    if forward_keep & set(regions.tangents):
        raise AssertionError("partition asks the forward for a value that needs the tangents")
    forward = _copy_graph(graph, regions.primals, forward_keep, [*regions.fwd_outputs, *saved_list])
    backward_inputs = [*saved_list, *regions.tangents]
    order = _on_demand_order(graph, backward_keep - set(backward_inputs), regions.tangent_dependent)
    backward = _copy_graph(graph, backward_inputs, backward_keep, regions.grads, order)
    # A lazy GraphModule (where the caller asked for them) writes its Python code on first use only.
    return _make_graph_module(joint.gm, forward), _make_graph_module(joint.gm, backward)
