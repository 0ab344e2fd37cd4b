"""CPU scalars a graph creates itself, moved to the device of the tensors they meet.

``torch.zeros((), dtype=torch.float64) + x`` with ``x`` on a GPU is fine in eager PyTorch: a 0-dim
CPU tensor mixes with tensors of any device. A generated CUDA kernel cannot read CPU memory, so
such a graph would mix devices and run eagerly. Where the only CPU tensors of a graph are 0-dim
tensors made inside it by a factory call with no tensor arguments (``torch.zeros(())``,
``torch.scalar_tensor(1.5)``, ``torch.tensor(2.0)``), never returned and used only by ops whose
results are on the graph's one other device, making them on that device instead gives the same
values: a 0-dim tensor takes part in type promotion the same way wherever it lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.fx.node import map_aggregate

__all__ = ["place_cpu_scalars"]


def _value(node: torch.fx.Node) -> Any:
    return node.meta.get("val", node.meta.get("example_value"))


def _has_tensor(args: Any) -> bool:
    found: list[bool] = []

    def visit(arg: Any) -> Any:
        if isinstance(arg, (torch.fx.Node, torch.Tensor)):
            found.append(True)
        return arg

    map_aggregate(args, visit)
    return bool(found)


def _movable(node: torch.fx.Node, device: torch.device) -> bool:
    """A 0-dim CPU tensor made by a factory call, whose users all compute on `device`."""
    value = _value(node)
    if node.op != "call_function" or not isinstance(value, torch.Tensor) or value.dim() != 0:
        return False
    if _has_tensor((node.args, node.kwargs)) or "out" in node.kwargs:
        return False
    for user in node.users:
        result = _value(user)
        if user.op == "output" or not isinstance(result, torch.Tensor) or result.device != device:
            return False
    return True


def place_cpu_scalars(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> bool:
    """Make `gm`'s own CPU scalars on its other device when that removes every CPU tensor from it.

    Returns whether the graph changed (it is recompiled then). Nothing changes unless exactly one
    other device remains and every CPU tensor of the graph is such a scalar.
    """
    cpu_nodes: list[torch.fx.Node] = []
    others: set[torch.device] = set()
    for value in [*example_inputs, *gm.parameters(), *gm.buffers()]:
        if isinstance(value, torch.Tensor):
            if value.device.type == "cpu":
                return False  # a CPU input stays: moving it would copy it on every call
            others.add(value.device)
    for node in gm.graph.nodes:
        value = _value(node)
        if isinstance(value, torch.Tensor):
            if value.device.type == "cpu":
                cpu_nodes.append(node)
            else:
                others.add(value.device)
    if not cpu_nodes or len(others) != 1:
        return False
    (device,) = others
    if not all(_movable(node, device) for node in cpu_nodes):
        return False
    for node in cpu_nodes:
        node.kwargs = {**node.kwargs, "device": device}
        value = _value(node)
        fake_mode = getattr(value, "fake_mode", None)
        key = "val" if "val" in node.meta else "example_value"
        if fake_mode is not None:
            with fake_mode:
                node.meta[key] = torch.empty((), dtype=value.dtype, device=device)
        else:
            node.meta[key] = torch.empty((), dtype=value.dtype, device=device)
    gm.recompile()
    return True
