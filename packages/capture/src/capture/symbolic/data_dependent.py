"""Calls whose result is a Python value read from tensor data, rewritten into graph ops.

Under `capture_scalar_outputs`, these stay in the graph instead of breaking it, as eager computes them:

* ``torch.equal(a, b)``: False when the shapes differ, else ``torch.eq(a, b).all().item()``, an unbacked
  SymBool (fake tensors refuse ``aten.equal``: its result is a Python bool read from the data);
* ``torch.allclose(a, b, rtol, atol, equal_nan)``: ``torch.isclose(...).all().item()``;
* ``torch.tensor_split(x, indices)`` with a tensor of indices: its values as unbacked SymInts
  (``indices.tolist()``), then ``tensor_split`` with that list (ATen's kernel reads the tensor's memory,
  which a fake tensor does not have).

A Python branch on the result is still a graph break at that line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv

from capture.variables.base import ConstantVariable, VariableTracker
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph

GUARD_ERRORS: tuple[type[BaseException], ...] = (GuardOnDataDependentSymNode,)
"""What fake propagation raises when an op's meta function must decide a condition on an unbacked
size or value (one only the data gives): a graph break at that op, as for ops fake tensors refuse."""

_EQUAL = (torch.equal, torch.Tensor.equal, "equal")
_ALLCLOSE = (torch.allclose, torch.Tensor.allclose, "allclose")
_TENSOR_SPLIT = (torch.tensor_split, torch.Tensor.tensor_split, "tensor_split")
_ALLCLOSE_PARAMETERS = ("rtol", "atol", "equal_nan")


def _is(target: Any, choices: tuple[Any, ...]) -> bool:
    return any(target is c if not isinstance(c, str) else target == c for c in choices)


def rewrite(output: OutputGraph, kind: str, target: Any, args: list[VariableTracker],
            kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """The traced result of a data-reading call, or None when `target(*args, **kwargs)` is not one."""
    if kind not in ("call_function", "call_method") or not output.config.capture_scalar_outputs:
        return None
    if _is(target, _EQUAL) and len(args) == 2 and not kwargs and isinstance(args[0], TensorVariable) and \
            isinstance(args[1], TensorVariable):
        return _equal(output, args[0], args[1])
    if _is(target, _ALLCLOSE) and len(args) >= 2 and all(isinstance(a, TensorVariable) for a in args[:2]):
        extra = dict(zip(_ALLCLOSE_PARAMETERS, args[2:]))
        if len(args) > 2 + len(_ALLCLOSE_PARAMETERS) or set(extra) & set(kwargs) or \
                set(kwargs) - set(_ALLCLOSE_PARAMETERS):
            return None  # let the call itself raise eager's TypeError
        close = output.call_graph("call_function", torch.isclose, list(args[:2]), {**extra, **kwargs})
        return _item(output, output.call_graph("call_method", "all", [close], {}))
    if _is(target, _TENSOR_SPLIT) and len(args) >= 2 and isinstance(args[1], TensorVariable):
        indices = args[1].example
        if indices.dim() == 1 and indices.dtype == torch.int64 and indices.device.type == "cpu":
            values = output.call_graph("call_method", "tolist", [args[1]], {})
            return output.call_graph(kind, target, [args[0], values, *args[2:]], kwargs)
    return None


def _equal(output: OutputGraph, a: TensorVariable, b: TensorVariable) -> VariableTracker:
    if a.example.dim() != b.example.dim():
        return ConstantVariable(False)
    # A branch on sizes (with a guard for symbolic ones), as eager compares them first.
    if any(bool(x != y) for x, y in zip(a.example.shape, b.example.shape)):
        return ConstantVariable(False)
    same = output.call_graph("call_function", torch.eq, [a, b], {})
    return _item(output, output.call_graph("call_method", "all", [same], {}))


def _item(output: OutputGraph, value: VariableTracker) -> VariableTracker:
    return output.call_graph("call_method", "item", [value], {})


def forget_pending_symbols(shape_env: ShapeEnv) -> None:
    """Drop the ShapeEnv's record of unbacked symbols made by the last fake call (capture binds them
    through its graph nodes' example values; a tracer sharing the ShapeEnv must not look for them)."""
    pending = getattr(shape_env, "pending_fresh_unbacked_symbols", None)
    if pending is not None:
        pending.clear()
