"""Builtins over a mix of tensors and Python values: `min(t, 3)`, `max(2, x.min())`, and the index of a
Python list given as a 0-d integer tensor whose value the trace knows (`lst[torch.tensor(1)]`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.common import _fold
from capture.variables.sym_values import SymNodeVariable, call_builtin
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


def min_max_with_tensors(tx: Tracer, fn: Any, values: list[VariableTracker]) -> VariableTracker | None:
    """`min(a, b, ...)`/`max(...)` where some values are one-element tensors and the others numbers or
    tensors of the same shape and dtype (None when that is not the case).

    Python compares the values (`b < a`), which for a tensor reads its data; the result is the same value as
    `torch.clamp(t, max=n)` (min) or `clamp(min=n)` (max), and `torch.minimum`/`maximum` for two tensors,
    so the choice stays in the graph. (Python hands back one of the arguments, a number where it wins:
    the graph gives a tensor of that value, of the tensor's dtype; mixes where that dtype would differ,
    such as an integer tensor against a float, keep the graph break.)"""
    if len(values) < 2 or not any(isinstance(v, TensorVariable) for v in values):
        return None
    tensors = [v for v in values if isinstance(v, TensorVariable)]
    first = tensors[0].example
    for tensor in tensors:
        example = tensor.example
        if example.dtype != first.dtype or example.shape != first.shape or example.dtype == torch.bool:
            return None
        if not isinstance(example.numel(), int) or example.numel() != 1:
            return None  # eager raises (an ambiguous truth value) or it depends on a symbolic size
    floating = first.dtype.is_floating_point or first.dtype.is_complex
    for value in values:
        if isinstance(value, TensorVariable):
            continue
        if isinstance(value, SymNodeVariable):
            number_type = value.python_type()
        elif value.is_constant() and type(value.as_constant()) in (int, float):
            number_type = type(value.as_constant())
        else:
            return None
        if number_type is float and not floating:
            return None
    result = values[0]
    for value in values[1:]:
        result = _pair(tx, fn, result, value)
    return result


def _pair(tx: Tracer, fn: Any, left: VariableTracker, right: VariableTracker) -> VariableTracker:
    if isinstance(left, TensorVariable) and isinstance(right, TensorVariable):
        return tx.output.call_graph("call_function", torch.minimum if fn is min else torch.maximum, [left, right], {})
    if not isinstance(left, TensorVariable) and not isinstance(right, TensorVariable):
        return call_builtin(tx, fn, [left, right], {}) or _fold(fn, [left, right], {})
    tensor, number = (left, right) if isinstance(left, TensorVariable) else (right, left)
    bound = "max" if fn is min else "min"
    return tx.output.call_graph("call_function", torch.clamp, [tensor], {bound: number})


def known_index(value: VariableTracker) -> int | None:
    """The Python index a 0-d integer tensor stands for, when the trace knows its value (a tensor made from
    constants, `torch.tensor(1)`, whose fake keeps that constant); None otherwise."""
    if not isinstance(value, TensorVariable):
        return None
    constant = getattr(value.example, "constant", None)
    if constant is None or constant.dtype.is_floating_point or constant.dtype.is_complex or \
            constant.dtype == torch.bool or constant.numel() != 1 or constant.dim() != 0:
        return None
    return int(constant.item())


def known_index_or_fail(value: VariableTracker) -> ConstantVariable:
    """`known_index` as a constant, or the graph break Python's `__index__` on run-time data needs."""
    index = known_index(value)
    if index is None:
        raise Unsupported("a tensor used as a list index (`__index__`) reads its run-time value")
    return ConstantVariable(index)
