"""Graphs with opaque nodes: split them, compile the parts between, run the opaque nodes eagerly.

Some nodes cannot be traced on fake tensors yet run fine on real ones: a custom
`torch.autograd.Function`'s `apply` (tracing would differentiate its forward instead of calling its
own backward), a custom operator with its own autograd kernel (`torch.library.custom_op` +
`register_autograd`, or a C++ extension's: the trace runs its forward below autograd, so the
gradient through it was lost) and a `Tensor.register_hook` (a hook registered on a stand-in is lost). Rather than
run the whole graph eagerly, `split_at_opaque_nodes` cuts the graph around them: each run of
ordinary nodes becomes a part compiled on its own (each part is its own autograd op), each opaque
node stays a plain call, and eager autograd chains them, so the custom backward and the hooks run
exactly as in eager.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Iterator
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


_BUILTIN_NAMESPACES = frozenset({"aten", "prims"})
_AUTOGRAD_KEYS = ("Autograd", "AutogradCPU", "AutogradCUDA")


def _is_custom_op_with_autograd(target: Any) -> bool:
    """A custom operator (outside aten/prims) with an autograd kernel of its own.

    Its forward runs below autograd (an autograd.Function's forward, with grad mode off), so a
    trace records the op with its result cut from the graph's autograd: MoE layers in
    transformers (`transformers::grouped_mm_fallback`) got no gradient for their expert weights.
    Run eagerly, the op's own backward runs as in eager.
    """
    if isinstance(target, torch._ops.OpOverloadPacket):
        overloads = [getattr(target, name) for name in target.overloads()]
    elif isinstance(target, torch._ops.OpOverload):
        overloads = [target]
    else:
        return False
    for overload in overloads:
        name = overload.name()
        if name.split("::", 1)[0] in _BUILTIN_NAMESPACES:
            return False
        if any(torch._C._dispatch_has_kernel_for_dispatch_key(name, key) for key in _AUTOGRAD_KEYS):
            return True
    return False


def is_opaque(node: torch.fx.Node) -> bool:
    """True for a node aotgrad leaves to eager: a custom `autograd.Function.apply`, a custom
    operator with its own autograd kernel, or a Python callable (not an op, not part of torch)
    marked as having side effects, such as the node that registers a tensor hook."""
    if node.op != "call_function":
        return False
    target = node.target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return _is_custom_op_with_autograd(target)
    if _is_autograd_function_apply(target):
        return True
    module = getattr(target, "__module__", None) or ""
    return node.is_impure() and module.split(".")[0] not in ("torch", "builtins", "_operator", "operator")


def _unpacks_opaque_result(node: torch.fx.Node, part_of: dict[torch.fx.Node, int], opaque_parts: set[int]) -> bool:
    source = node.args[0] if node.op == "call_function" and node.target is operator.getitem else None
    return isinstance(source, torch.fx.Node) and part_of.get(source) in opaque_parts


_HIDDEN = "aotgrad_hidden_example_value"


@contextlib.contextmanager
def _example_values_hidden(gm: torch.fx.GraphModule) -> Iterator[None]:
    """Hide the nodes' ``example_value`` meta from `split_module` (kept under another key).

    With example values, `split_module` threads every size symbol from the node that first binds
    it into each part that uses a tensor of that size. A captured graph has no SymInt
    placeholders, so the first binding is a `size()` call inside some part, and an input used
    before it (in that part or an earlier one) makes that part depend on itself or on a later
    one: "cycle exists between partitions" on the first dynamic-shape call. The parts do not need
    the symbols: each is compiled on its own first call, from real inputs, and sizes that cross
    parts as values are ordinary cross-part uses.
    """
    stashed = [node for node in gm.graph.nodes if "example_value" in node.meta]
    for node in stashed:
        node.meta[_HIDDEN] = node.meta.pop("example_value")
    try:
        yield
    finally:
        for node in stashed:
            node.meta["example_value"] = node.meta.pop(_HIDDEN)


def _restore_example_values(split: torch.fx.GraphModule) -> None:
    """Put the example values back on the split graph's and its parts' nodes (their meta are copies)."""
    for module in split.modules():
        if isinstance(module, torch.fx.GraphModule):
            for node in module.graph.nodes:
                if _HIDDEN in node.meta:
                    node.meta["example_value"] = node.meta.pop(_HIDDEN)


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
    with _example_values_hidden(gm):
        split = split_module(gm, gm, lambda node: part_of[node], keep_original_order=True)
    _restore_example_values(split)
    for name, child in list(split.named_children()):
        index = int(name.removeprefix("submod_"))
        if index not in opaque_parts and isinstance(child, torch.fx.GraphModule):
            setattr(split, name, CompiledPart(child, compile_part(child)))
    return split
