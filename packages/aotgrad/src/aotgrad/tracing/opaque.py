"""Graphs with opaque nodes: split them, compile the parts between, run the opaque nodes eagerly.

Some nodes cannot be traced on fake tensors yet run fine on real ones: a custom
`torch.autograd.Function`'s `apply` (tracing would differentiate its forward instead of calling its
own backward) and a `Tensor.register_hook` (a hook registered on a stand-in is lost). Rather than
run the whole graph eagerly, `split_at_opaque_nodes` cuts the graph around them: each run of
ordinary nodes becomes a part compiled on its own (each part is its own autograd op), each opaque
node stays a plain call, and eager autograd chains them, so the custom backward and the hooks run
exactly as in eager.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.passes.split_module import split_module

__all__ = ["is_opaque", "split_at_opaque_nodes"]

PartCompiler = Callable[[torch.fx.GraphModule], Callable[..., Any]]


def _callable_behind(target: Any) -> Any:
    # A graph recorder may wrap the real callable (capture's `GraphCallable` keeps it in `.fn`).
    return getattr(target, "fn", target)


def _is_autograd_function_apply(target: Any) -> bool:
    owner = getattr(_callable_behind(target), "__self__", None)
    return isinstance(owner, type) and issubclass(owner, torch.autograd.Function)


def is_opaque(node: torch.fx.Node) -> bool:
    """True for a node aotgrad leaves to eager: a custom `autograd.Function.apply`, or a Python
    callable (not an op, not part of torch) marked as having side effects, such as the node that
    registers a tensor hook."""
    if node.op != "call_function":
        return False
    target = node.target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return False
    if _is_autograd_function_apply(target):
        return True
    module = getattr(target, "__module__", None) or ""
    return node.is_impure() and module.split(".")[0] not in ("torch", "builtins", "_operator", "operator")


def _unpacks_opaque_result(node: torch.fx.Node, part_of: dict[torch.fx.Node, int], opaque_parts: set[int]) -> bool:
    source = node.args[0] if node.op == "call_function" and node.target is operator.getitem else None
    return isinstance(source, torch.fx.Node) and part_of.get(source) in opaque_parts


class CompiledPart(torch.nn.Module):
    """A part of a split graph behind its compiled callable (the part's parameters stay shared)."""

    def __init__(self, part: torch.fx.GraphModule, compiled: Callable[..., Any]) -> None:
        super().__init__()
        self.part = part
        self._compiled = compiled

    def forward(self, *args: Any) -> Any:
        """Run the compiled part."""
        return self._compiled(*args)


def split_at_opaque_nodes(gm: torch.fx.GraphModule, compile_part: PartCompiler) -> torch.fx.GraphModule | None:
    """`gm` cut around its opaque nodes, with each part between compiled by `compile_part`.

    Returns:
        A GraphModule taking `gm`'s inputs that runs the compiled parts and the opaque nodes in
        order, or None when `gm` has no opaque node.
    """
    part_of: dict[torch.fx.Node, int] = {}
    part = 0
    opaque_parts: set[int] = set()
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if is_opaque(node):
            part += 1
            part_of[node] = part
            opaque_parts.add(part)
            part += 1
        elif _unpacks_opaque_result(node, part_of, opaque_parts):
            # `a, b = Fn.apply(x)`: the unpacking stays with the call, so parts take tensors, not tuples
            part_of[node] = part_of[node.args[0]]  # type: ignore[index]
        else:
            part_of[node] = part
    if not opaque_parts:
        return None
    split = split_module(gm, gm, lambda node: part_of[node], keep_original_order=True)
    for name, child in list(split.named_children()):
        index = int(name.removeprefix("submod_"))
        if index not in opaque_parts and isinstance(child, torch.fx.GraphModule):
            setattr(split, name, CompiledPart(child, compile_part(child)))
    return split
