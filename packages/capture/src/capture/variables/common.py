"""What trackers of callables share: argument lists, folding a call on constants, Python's ordering of
trackers (`sorted`), and the tables of the `operator` functions."""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any

from capture.variables.base import (
    ConstantVariable,
    ExceptionVariable,
    Unsupported,
    VariableTracker,
    is_constant_value,
)
from capture.variables.containers import DictVariable, ListVariable, TupleVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


BINARY_OPERATORS = [operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul,
                    operator.mul, operator.mod, operator.or_, operator.pow, operator.rshift, operator.sub,
                    operator.truediv, operator.xor]
INPLACE_OPERATORS = [operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift, operator.imatmul,
                     operator.imul, operator.imod, operator.ior, operator.ipow, operator.irshift, operator.isub,
                     operator.itruediv, operator.ixor]
COMPARE_OPERATORS = [operator.lt, operator.le, operator.eq, operator.ne, operator.gt, operator.ge]
UNARY_OPERATORS = [operator.neg, operator.pos, operator.invert, operator.not_]
OPERATOR_FUNCTIONS = set(BINARY_OPERATORS + INPLACE_OPERATORS + COMPARE_OPERATORS + UNARY_OPERATORS
                         + [operator.getitem, operator.contains, operator.abs, operator.truth])

Args = list[VariableTracker]
Kwargs = dict[str, VariableTracker]


def _fold(fn: Any, args: Args, kwargs: Kwargs) -> VariableTracker:
    try:
        value = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as error:
        raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    return _wrap_result(value)


def _wrap_result(value: Any) -> VariableTracker:
    if is_constant_value(value):
        return ConstantVariable(value)
    if isinstance(value, BaseException):
        return ExceptionVariable(value)
    if isinstance(value, list):
        return ListVariable([_wrap_result(v) for v in value])
    if isinstance(value, tuple):
        return TupleVariable([_wrap_result(v) for v in value])
    if isinstance(value, dict):
        return DictVariable({k: _wrap_result(v) for k, v in value.items()})
    raise Unsupported(f"builtin returned {type(value).__name__}")


def _items(tx: Tracer, value: VariableTracker) -> list[VariableTracker]:
    return value.iterate(tx)


def _sorted(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    """sorted(iterable, key=..., reverse=...): keys must be constants at trace time."""
    items = _items(tx, args[0])
    key = kwargs.get("key")
    reverse = bool(kwargs["reverse"].as_constant()) if "reverse" in kwargs else False
    if key is None or (key.is_constant() and key.as_constant() is None):
        ranked = list(items)
    else:
        ranked = [key.call(tx, [item], {}) for item in items]
    def compare(i: int, j: int) -> int:
        return _compare_trackers(ranked[i], ranked[j])

    order = sorted(range(len(items)), key=functools.cmp_to_key(compare), reverse=reverse)
    return ListVariable([items[i] for i in order])


def _compare_trackers(left: VariableTracker, right: VariableTracker) -> int:
    """Python's ordering of two trackers: constants, and tuples compared item by item up to the first
    difference (so `sorted(d.items())` never compares the tensor values of distinct keys)."""
    if left.is_constant() and right.is_constant():
        a, b = left.as_constant(), right.as_constant()
        try:
            return -1 if a < b else 1 if b < a else 0
        except TypeError as error:
            raise Unsupported(f"TypeError: {error}", user_error=True) from error
    if isinstance(left, TupleVariable) and isinstance(right, TupleVariable):
        for a, b in zip(left.items, right.items):
            if a is b:
                continue
            outcome = _compare_trackers(a, b)
            if outcome:
                return outcome
        return (len(left.items) > len(right.items)) - (len(left.items) < len(right.items))
    raise Unsupported(f"ordering {left} and {right} depends on traced values")
