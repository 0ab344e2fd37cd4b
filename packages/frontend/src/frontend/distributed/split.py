"""Cutting a captured graph into its buckets' subgraphs, and running the compiled subgraphs in turn.

Each subgraph is an `fx.GraphModule` over the same module tree as the captured graph (a layer
called there is called here), taking as inputs the values it uses from the graph's inputs or from
earlier subgraphs, and returning, as a tuple, those of its values that later subgraphs or the
graph's output use. Attributes (``get_attr``: parameters, buffers, constants) are read where they
are used, never passed between subgraphs. `BucketedGraph` calls the compiled subgraphs one after
another, each its own autograd node: in backward, autograd runs them last to first, and DDP
all-reduces each bucket's gradients while the earlier subgraphs' backward still computes.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

import aotgrad
from frontend.distributed.buckets import BucketPlan


@dataclass(frozen=True)
class Subgraph:
    """One bucket's part of a captured graph.

    Attributes:
        module: the subgraph, returning a tuple of `outputs`.
        inputs: the nodes of the captured graph whose values it takes, in placeholder order.
        outputs: the nodes of the captured graph whose values it returns.
    """

    module: torch.fx.GraphModule
    inputs: tuple[torch.fx.Node, ...]
    outputs: tuple[torch.fx.Node, ...]


def split_graph(gm: torch.fx.GraphModule, plan: BucketPlan) -> list[Subgraph]:
    """`gm`'s nodes cut into one subgraph per bucket of `plan` (which names every compute node once)."""
    by_name = {node.name: node for node in gm.graph.nodes}
    subgraphs = []
    for index, bucket in enumerate(plan.buckets):
        members = [by_name[name] for name in bucket.nodes]
        member_set = set(members)
        inputs: list[torch.fx.Node] = []
        attributes: list[torch.fx.Node] = []
        for node in members:
            for used in node.all_input_nodes:
                if used in member_set or used in inputs or used in attributes:
                    continue
                (attributes if used.op == "get_attr" else inputs).append(used)
        graph = torch.fx.Graph()
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        for used in inputs:
            env[used] = graph.placeholder(used.name)
            env[used].meta = dict(used.meta)
        for used in attributes:
            env[used] = graph.get_attr(str(used.target))
            env[used].meta = dict(used.meta)
        for node in members:
            env[node] = graph.node_copy(node, env.__getitem__)
        outputs = tuple(node for node in members if any(user not in member_set for user in node.users))
        graph.output(tuple(env[node] for node in outputs))
        module = torch.fx.GraphModule(gm, graph, class_name=f"BucketSubgraph{index}")
        subgraphs.append(Subgraph(module, tuple(inputs), outputs))
    return subgraphs


def subgraph_example_inputs(gm: torch.fx.GraphModule, subgraph: Subgraph, example_inputs: Sequence[Any]) -> list[Any]:
    """What a backend is given to compile `subgraph`, matching what capture gives for `gm`.

    The graph's own inputs are passed as they are. An intermediate value is described by capture's
    fake tensor of it: passed as a fake (detached, keeping ``requires_grad``) when capture gives fakes
    (symbolic sizes), else as a real tensor of the same size, strides and dtype, filled with zeros
    (so no random numbers are drawn from the user's generator).
    """
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    given = dict(zip(placeholders, example_inputs, strict=False))
    fake = any(_is_fake(value) for value in example_inputs)
    values = []
    for node in subgraph.inputs:
        if node in given:
            values.append(given[node])
            continue
        described = node.meta.get("example_value")
        if not isinstance(described, torch.Tensor):
            raise ValueError(f"the value of {node.format_node()} crosses subgraphs but capture recorded no tensor for it")
        values.append(_stand_in(described, fake))
    return values


def _is_fake(value: Any) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(value, FakeTensor)


def _stand_in(described: torch.Tensor, fake: bool) -> torch.Tensor:
    if fake:
        value = described.detach()
    else:
        value = torch.empty_strided(tuple(described.shape), tuple(described.stride()), dtype=described.dtype,
                                    device=described.device)
        value.zero_()
    return value.requires_grad_(described.requires_grad) if described.requires_grad else value


@dataclass(frozen=True)
class _Step:
    run: Callable[..., Any]
    boxed: bool
    reads: tuple[int, ...]
    writes: tuple[int, ...]
    frees: tuple[int, ...]


class BucketedGraph:
    """A captured graph run as its compiled bucket subgraphs, one after another.

    Called like the captured graph (positional inputs in, its output tuple out). Values live in
    numbered slots, each freed after its last reader, as eager frees them.

    Attributes:
        plan: the `BucketPlan` the graph was cut by.
        subgraphs: the uncompiled subgraphs, in the order they run.
    """

    def __init__(self, gm: torch.fx.GraphModule, plan: BucketPlan, subgraphs: Sequence[Subgraph],
                 compiled: Sequence[Callable[..., Any]]) -> None:
        self.plan = plan
        self.subgraphs = tuple(subgraphs)
        slots: dict[torch.fx.Node, int] = {}

        def slot(node: torch.fx.Node) -> int:
            return slots.setdefault(node, len(slots))

        placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
        self._input_slots = tuple(slot(node) for node in placeholders)
        self._constants: list[tuple[int, Any]] = []
        for node in gm.graph.nodes:
            if node.op == "get_attr":
                self._constants.append((slot(node), operator.attrgetter(str(node.target))(gm)))
        output_node = next(node for node in gm.graph.nodes if node.op == "output")
        last_reader: dict[int, int] = {}
        for index, subgraph in enumerate(subgraphs):
            for node in subgraph.inputs:
                last_reader[slot(node)] = index
        kept = {slot(node) for node in output_node.all_input_nodes}
        steps = []
        for index, (subgraph, run) in enumerate(zip(subgraphs, compiled, strict=True)):
            reads = tuple(slot(node) for node in subgraph.inputs)
            frees = tuple(s for s in dict.fromkeys(reads) if last_reader.get(s) == index and s not in kept)
            steps.append(_Step(run, aotgrad.is_boxed(run), reads,
                               tuple(slot(node) for node in subgraph.outputs), frees))
        self._steps = tuple(steps)
        self._size = len(slots)
        self._output = _slotted(output_node.args[0], slots)

    def __call__(self, *args: Any) -> Any:
        values: list[Any] = [None] * self._size
        for index, value in zip(self._input_slots, args, strict=True):
            values[index] = value
        for index, value in self._constants:
            values[index] = value
        for step in self._steps:
            inputs = [values[s] for s in step.reads]
            outputs = step.run(inputs) if step.boxed else step.run(*inputs)
            for s in step.frees:
                values[s] = None
            for s, value in zip(step.writes, outputs, strict=True):
                values[s] = value
        return _fill(self._output, values)


def _slotted(structure: Any, slots: dict[torch.fx.Node, int]) -> Any:
    """The captured graph's output structure with each node replaced by the `_Slot` holding its value."""
    if isinstance(structure, torch.fx.Node):
        return _Slot(slots[structure])
    if isinstance(structure, list):
        return [_slotted(item, slots) for item in structure]
    if isinstance(structure, tuple):
        return tuple(_slotted(item, slots) for item in structure)
    if isinstance(structure, dict):
        return {key: _slotted(item, slots) for key, item in structure.items()}
    return structure


def _fill(structure: Any, values: list[Any]) -> Any:
    """The captured graph's output structure with each slot number replaced by its value."""
    if isinstance(structure, tuple):
        return tuple(_fill(item, values) for item in structure)
    if isinstance(structure, list):
        return [_fill(item, values) for item in structure]
    if isinstance(structure, dict):
        return {key: _fill(item, values) for key, item in structure.items()}
    return values[structure.index] if isinstance(structure, _Slot) else structure


@dataclass(frozen=True)
class _Slot:
    """Where the captured graph's output reads a value (constants in the output stay as they are)."""

    index: int
