"""The two partitioners: `save_all` (plain split) and `min_cut` (fewest bytes saved)."""

from __future__ import annotations

import logging

import torch
import torch.fx

from aotgrad.partition.compress import save_masks_as_bool
from aotgrad.partition.maxflow import INFINITE, FlowNetwork
from aotgrad.partition.policy import is_recomputable, node_bytes, saves_input_cast, wide_recomputes
from aotgrad.partition.split import JointRegions, split_joint
from aotgrad.tracing.joint import JointGraph

log = logging.getLogger("aotgrad.partition")

_SOURCE = ("source",)
_SINK = ("sink",)


def save_all(joint: JointGraph) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """The plain split: the forward computes everything that does not need the tangents and saves
    every such value the backward reads.

    Args:
        joint: a traced joint graph (`aotgrad.tracing.trace_joint`).

    Returns:
        `(forward, backward)`: forward maps primals to `(*forward outputs, *saved)`, backward maps
        `(*saved, *tangents)` to the gradients.
    """
    return split_joint(joint, JointRegions(joint).backward_reads())


def _capacity(node: torch.fx.Node, is_primal: bool) -> int:
    size = node_bytes(node)
    if size is None:
        return INFINITE
    # Saving an input holds no new memory (the caller keeps it, or it is a parameter): nearly free.
    return 1 if is_primal else size


def min_cut_saved_values(joint: JointGraph) -> list[torch.fx.Node]:
    """The values `min_cut` saves: a minimum cut, in bytes, between the forward inputs and the
    backward, where only cheap ops (see `aotgrad.partition.policy`) may be recomputed, casts
    of inputs that `saves_input_cast` picks (a parameter's bf16 copy feeding a GEMM) are saved, and
    so is a value `wide_recomputes` finds would be rebuilt from too many saved tensors.

    Each forward-side node `n` becomes an edge `n.in -> n.out` whose capacity is its size; the
    source feeds the primals and every node that must not be recomputed, the sink drains every
    value the backward reads. The cut edges are the values to save.
    """
    regions = JointRegions(joint)
    primals = set(regions.primals)
    forward = [n for n in regions.graph.nodes if n.op != "output" and n not in regions.tangent_dependent]
    wide = wide_recomputes(forward, primals | {n for n in forward if not is_recomputable(n)})
    net = FlowNetwork()
    for node in forward:
        net.add_edge((node, "in"), (node, "out"), _capacity(node, node in primals))
        banned = (
            not is_recomputable(node)
            or saves_input_cast(node, primals, regions.tangent_dependent)
            or node in wide
        )
        if node in primals or (banned and node.op != "placeholder"):
            net.add_edge(_SOURCE, (node, "in"), INFINITE)
        for user in node.users:
            if user.op == "output" or user in regions.tangent_dependent:
                continue
            net.add_edge((node, "out"), (user, "in"), INFINITE)
        if any(user in regions.tangent_dependent for user in node.users):
            net.add_edge((node, "out"), _SINK, INFINITE)
    for grad in regions.grads:
        if isinstance(grad, torch.fx.Node) and grad not in regions.tangent_dependent:
            net.add_edge((grad, "out"), _SINK, INFINITE)
    net.add_edge(_SOURCE, _SINK, 0)  # both ends exist even for a graph with no backward reads
    value, source_side = net.min_cut(_SOURCE, _SINK)
    if value >= INFINITE:
        raise ValueError("no finite cut: the backward reads a value that cannot be saved")
    return [
        node
        for node in regions.graph.nodes
        if (node, "in") in source_side and (node, "out") not in source_side and node.op != "output"
    ]


def min_cut(joint: JointGraph) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """Partition so that the forward saves the fewest bytes, recomputing cheap ops in the backward.

    Matmuls, convolutions, reductions and random ops are never recomputed, so dropout masks are
    drawn once and forward and backward agree; saved 0/1 masks cross as bools (exact, 4x smaller). Falls back to `save_all` (with a logged reason)
    when no finite cut exists.

    Args:
        joint: a traced joint graph (`aotgrad.tracing.trace_joint`).

    Returns:
        `(forward, backward)`, with the same signatures as `save_all`'s.
    """
    try:
        saved = min_cut_saved_values(joint)
    except ValueError as error:
        log.warning("min_cut partition fell back to save_all: %s", error)
        return save_all(joint)
    forward, backward = split_joint(joint, saved)
    save_masks_as_bool(forward, backward, joint.num_fwd_outputs)
    return forward, backward
