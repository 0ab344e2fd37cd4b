"""What tracing the forward in one functionalized pass needs: batch norm decomposed above
functionalization, and the checks that send a graph back to the two-pass trace.

`trace_functional` traces `functionalize(fn)` once. Functionalization only sees mutations that an
op's schema declares, and `native_batch_norm` / `cudnn_batch_norm` update the running statistics
without declaring it; `BatchNormAboveFunctionalization` therefore calls batch norm, at the
torch-function level, as the op that does declare it (`_native_batch_norm_legit`).
Whatever the single pass cannot express (a mutation it did not see, an in-place op on a tensor
made from a graph constant, a change of an input's shape or strides) makes it give up
(`SinglePassUnsupported`), and the caller traces in two passes as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from aotgrad.decompositions import DecompositionTable

aten = torch.ops.aten

_FUNCTIONAL_BATCH_NORM = inspect.signature(F.batch_norm)


class SinglePassUnsupported(Exception):
    """The one-pass trace cannot express this function faithfully; trace it in two passes."""


class BatchNormAboveFunctionalization(TorchFunctionMode):
    """Runs training-mode batch norm with running statistics as `_native_batch_norm_legit`, whose
    schema declares that it updates them: functionalization turns it into
    `_native_batch_norm_legit_functional` (returning the new statistics), which the early table
    decomposes below autograd. (The kernels `F.batch_norm` reaches, `native_batch_norm` and
    `cudnn_batch_norm`, update them without saying so.) The new statistics come out in their own
    dtype, as eager's in-place update leaves them.

    Every other call (and batch norm without running statistics, or in eval mode: no mutation)
    goes through unchanged; so does everything when `early` cannot decompose the functional op.
    """

    def __init__(self, early: DecompositionTable) -> None:
        super().__init__()
        self._enabled = aten._native_batch_norm_legit_functional.default in early

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self._enabled:
            if func is F.batch_norm:
                bound = _FUNCTIONAL_BATCH_NORM.bind(*args, **kwargs)
                bound.apply_defaults()
                a = bound.arguments
                if _mutates_running_stats(a["running_mean"], a["running_var"], a["training"], a["eps"]):
                    F._verify_batch_size(a["input"].size())  # type: ignore[attr-defined]
                    return _batch_norm(
                        a["input"], a["weight"], a["bias"], a["running_mean"], a["running_var"], a["momentum"], a["eps"]
                    )
            elif func is torch.batch_norm and len(args) >= 8 and not kwargs:
                x, weight, bias, running_mean, running_var, training, momentum, eps = args[:8]
                if _mutates_running_stats(running_mean, running_var, training, eps):
                    return _batch_norm(x, weight, bias, running_mean, running_var, momentum, eps)
        return func(*args, **kwargs)


def _batch_norm(
    x: Any, weight: Any, bias: Any, running_mean: Any, running_var: Any, momentum: float, eps: float
) -> torch.Tensor:
    # Below autocast, as the kernel it stands for runs.
    with torch._C._DisableAutocast():
        out = aten._native_batch_norm_legit.default(x, weight, bias, running_mean, running_var, True, momentum, eps)
    return out[0]  # type: ignore[no-any-return]


def traceable_in_one_pass(inputs: Sequence[Any]) -> bool:
    """Whether the one-pass trace applies: all input sizes are static. (Sizes read from a
    functionalized input are not the ones make_fx tracks, so symbolic sizes would be baked in as
    their hints; the two-pass trace reads them through recorded `sym_size` calls.)"""
    return not any(
        isinstance(s, torch.SymInt)
        for x in inputs
        if isinstance(x, torch.Tensor)
        for s in (*x.shape, *x.stride(), x.storage_offset())
    )


def _mutates_running_stats(running_mean: Any, running_var: Any, training: Any, eps: Any) -> bool:
    return (
        training is True
        and isinstance(running_mean, torch.Tensor)
        and isinstance(running_var, torch.Tensor)
        and isinstance(eps, float)
        and eps > 0.0
    )


def _same_size(a: Any, b: Any) -> bool:
    if isinstance(a, torch.SymInt) or isinstance(b, torch.SymInt):
        # Compare the expressions: no guard on the shape environment.
        return bool(getattr(getattr(a, "node", a), "expr", a) == getattr(getattr(b, "node", b), "expr", b))
    return bool(a == b)


def input_metadata(inputs: Sequence[Any]) -> list[tuple[Any, ...] | None]:
    """Per input, what an in-place metadata change (`t_`, `resize_`, `detach_`, ...) would alter."""
    return [
        (*x.shape, None, *x.stride(), x.storage_offset(), x.requires_grad) if isinstance(x, torch.Tensor) else None
        for x in inputs
    ]


def check_input_metadata_kept(before: list[tuple[Any, ...] | None], inputs: Sequence[Any]) -> None:
    """Raise `SinglePassUnsupported` when an input's shape, strides or grad flag changed in place
    (the two-pass trace then reports it)."""
    for old, new in zip(before, input_metadata(inputs)):
        if old is None or new is None:
            continue
        if len(old) != len(new) or not all(_same_size(a, b) for a, b in zip(old, new)):
            raise SinglePassUnsupported("an input's metadata changed in place")


def check_one_pass_graph(gm: torch.fx.GraphModule) -> None:
    """Raise `SinglePassUnsupported` where the one-pass graph may differ from the two-pass one.

    * An in-place op other than functionalization's own `copy_`s into inputs at the end of the
      graph (the new values of mutated inputs): an op on a tensor made from a graph constant,
      which functionalization does not wrap, or a mutation it did not see, decomposed below it.
    * A random op drawing into a tensor (`bernoulli.p`, from dropout's `empty_like(x).bernoulli_(p)`
      on CPU, say): functionalization allocates that tensor differently, and eager's numbers are
      drawn in the memory order the two-pass trace keeps (`draw_random_in_memory_order`).
      `native_dropout` (dropout on CUDA), attention with dropout and random ops that only take
      sizes are the same either way.
    """
    nodes = list(gm.graph.nodes)
    end = len(nodes) - 1  # the output node
    while end > 0 and _is_input_copy(nodes[end - 1]):
        end -= 1
    for node in nodes[:end]:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if target._schema.is_mutable:
            raise SinglePassUnsupported(f"in-place `{target}` left after functionalization")
        if _draws_into_a_tensor(target):
            raise SinglePassUnsupported(f"random `{target}` drawing into a tensor")


def _draws_into_a_tensor(op: torch._ops.OpOverload) -> bool:
    """The functional form of an in-place random op (`bernoulli`, `uniform`, `normal`, ...)."""
    if torch.Tag.nondeterministic_seeded not in op.tags:
        return False
    name = op._schema.name.split("::")[-1]
    return name == "normal_functional" or hasattr(aten, name + "_")


def _is_input_copy(node: torch.fx.Node) -> bool:
    return (
        node.op == "call_function"
        and node.target is aten.copy_.default
        and isinstance(node.args[0], torch.fx.Node)
        and node.args[0].op == "placeholder"
    )
