"""How many bytes each partitioner saves for the backward, for a model or function."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from aotgrad.compile import trace_region
from aotgrad.decompositions import (
    DecompositionSource,
    default_decompositions,
    with_eager_values,
)
from aotgrad.partition import min_cut, save_all
from aotgrad.partition.policy import value_bytes
from aotgrad.tracing.graph_passes import output_values
from aotgrad.tracing.joint import JointGraph


@dataclasses.dataclass(frozen=True)
class SavedValues:
    """What one partitioner saves: counts and bytes, split into graph inputs and activations."""

    count: int
    activation_bytes: int
    input_bytes: int
    recomputed_ops: int

    @property
    def total_bytes(self) -> int:
        """Activations plus saved inputs (parameters, the user's inputs)."""
        return self.activation_bytes + self.input_bytes


@dataclasses.dataclass(frozen=True)
class SavedBytesReport:
    """Bytes saved for the backward under `save_all` and under `min_cut`."""

    save_all: SavedValues
    min_cut: SavedValues

    def __str__(self) -> str:
        rows = [f"{'partition':<10} {'saved':>6} {'activations':>14} {'inputs':>12} {'recomputed ops':>15}"]
        for name, v in (("save_all", self.save_all), ("min_cut", self.min_cut)):
            rows.append(
                f"{name:<10} {v.count:>6} {v.activation_bytes:>14,} {v.input_bytes:>12,} {v.recomputed_ops:>15}"
            )
        return "\n".join(rows)


def _view_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose memory `node` views (itself when it is not a view)."""
    while (
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.is_view
        and isinstance(node.args[0], torch.fx.Node)
    ):
        node = node.args[0]
    return node


def measure_saved(
    joint: JointGraph, partition: Callable[[JointGraph], tuple[torch.fx.GraphModule, torch.fx.GraphModule]]
) -> SavedValues:
    """Partition `joint` and count what the forward hands the backward.

    Saved inputs and views of inputs count as `input_bytes` (they hold no new memory); everything
    else as `activation_bytes`.
    """
    forward, backward = partition(joint)
    saved = output_values(forward.graph)[joint.num_fwd_outputs :]
    activation = inputs = 0
    for node in saved:
        size = value_bytes(node.meta.get("val")) or 0
        if _view_root(node).op == "placeholder":
            inputs += size
        else:
            activation += size
    saved_names = {node.name for node in saved}
    backward_ops = [n for n in backward.graph.nodes if n.op == "call_function"]
    # Recomputed: backward ops whose inputs are all saved values or other recomputed ops.
    recomputed: set[str] = set()
    tangents = {n.name for n in backward.graph.nodes if n.op == "placeholder" and n.name not in saved_names}
    for node in backward_ops:
        sources = {a.name for a in node.all_input_nodes}
        if not sources & tangents and all(s in saved_names or s in recomputed for s in sources):
            recomputed.add(node.name)
    return SavedValues(len(saved), activation, inputs, len(recomputed))


def saved_bytes_report(
    model_or_fn: torch.nn.Module | Callable[..., Any],
    example_inputs: Sequence[Any],
    *,
    decompositions: DecompositionSource | None = None,
) -> SavedBytesReport:
    """Bytes saved for the backward by `save_all` and by `min_cut`, for a model or a function.

    Gradients are those of every parameter and every example input that requires grad.

    Example:
        >>> print(saved_bytes_report(block, [torch.randn(8, 128, 256)]))
    """
    state: list[torch.Tensor] = []
    fn: Callable[..., Any] = model_or_fn
    if isinstance(model_or_fn, torch.nn.Module):
        module = model_or_fn
        names = [n for n, _ in module.named_parameters()] + [n for n, _ in module.named_buffers()]
        state = [*module.parameters(), *module.buffers()]
        count = len(state)

        def fn(*flat: Any) -> Any:
            return torch.func.functional_call(module, dict(zip(names, flat[:count])), flat[count:])

    flat_inputs = [*state, *example_inputs]
    mask = [
        isinstance(x, torch.Tensor) and x.requires_grad and x.is_floating_point() for x in flat_inputs
    ]
    table = default_decompositions() if decompositions is None else with_eager_values(decompositions)
    joint = trace_region(fn, flat_inputs, mask, table).joint
    assert joint is not None
    return SavedBytesReport(measure_saved(joint, save_all), measure_saved(joint, min_cut))
