"""Unary, binary, comparison, identity and membership operators, subscripts and slices."""

from __future__ import annotations

import enum
import operator
import os
import types
from typing import TYPE_CHECKING, Any

from capture.bytecode.registry import Instruction, opcode
from capture.bytecode.stack import truth_tested_next
from capture.symbolic.operators import apply_operator, identical
from capture.variables.autograd_calls import realize_value
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.builtins import BuiltinVariable
from capture.variables.collections_types import (
    CounterVariable,
    DefaultDictVariable,
    DequeVariable,
    SetVariable,
    counter_operator,
    existing_collection,
    set_operator,
    view_operator,
)
from capture.variables.common import BINARY_OPERATORS, COMPARE_OPERATORS, INPLACE_OPERATORS
from capture.variables.containers import DictVariable, ListVariable, TupleVariable
from capture.variables.library import structseq_operator
from capture.variables.model_output import ModelOutputVariable
from capture.variables.ndarray import NdarrayVariable, ndarray_setitem
from capture.variables.objects import (
    EnvironReadVariable,
    PythonObjectVariable,
    SkippedFunctionVariable,
    TorchFunctionVariable,
)
from capture.variables.sym_values import SymNodeVariable, SymSliceVariable
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


@opcode("BINARY_OP")
def binary_op(tx: InstructionTranslator, instr: Instruction) -> None:
    index = int(instr.arg)
    fn = BINARY_OPERATORS[index] if index < 13 else INPLACE_OPERATORS[index - 13]
    right = tx.pop()
    left = tx.pop()
    result = _collection_operator(fn, left, right)
    tx.push(result if result is not None else apply_operator(tx, fn, [left, right]))


def _collection_operator(fn: Any, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """Operators of traced sets and Counters (None for other operands)."""
    for rule in (set_operator, counter_operator, view_operator):
        result = rule(fn, left, right)
        if result is not None:
            return result
    return None


def _generic_alias(tx: InstructionTranslator, container: VariableTracker,
                   index: VariableTracker) -> VariableTracker | None:
    """`list[torch.Tensor]`, `typing.Optional[int]`: a type expression, evaluated now (types do not change)."""
    import typing

    if isinstance(container, BuiltinVariable) and isinstance(container.fn, type):
        origin: Any = container.fn
    elif isinstance(container, SkippedFunctionVariable) and getattr(container.fn, "__module__", None) == "typing":
        origin = container.fn
    elif isinstance(container, PythonObjectVariable) and (
            getattr(container.value, "__module__", None) == "typing" or isinstance(container.value, type)):
        origin = container.value
    else:
        return None
    if isinstance(origin, type) and not hasattr(origin, "__class_getitem__"):
        return None
    if not isinstance(index, (PythonObjectVariable, BuiltinVariable, TorchFunctionVariable, TupleVariable)) and \
            not (index.is_constant() and (index.as_constant() is None or isinstance(index.as_constant(), tuple))):
        return None
    try:
        alias = origin[realize_value(tx, index)]
    except Exception:
        return None
    if not isinstance(alias, (types.GenericAlias, typing._GenericAlias)) and type(alias).__module__ != "typing":  # type: ignore[attr-defined]
        return None
    return PythonObjectVariable(alias, None)


def _as_collection(tx: InstructionTranslator, value: VariableTracker) -> VariableTracker:
    """An existing deque / OrderedDict / defaultdict / Counter as its container tracker (others unchanged)."""
    collection = existing_collection(tx, value)
    return collection if collection is not None else value


_COMPARE_TO_BOOL = 0x10
"""3.13's COMPARE_OP bit (the `bytecode` library's `Compare.*_CAST`): convert the result with bool()."""


@opcode("COMPARE_OP")
def compare_op(tx: InstructionTranslator, instr: Instruction) -> None:
    fn = COMPARE_OPERATORS[int(instr.arg) & 0xF]
    right = tx.pop()
    left = tx.pop()
    result = _collection_operator(fn, left, right)
    if result is None:
        result = structseq_operator(tx, fn, left, right)
    if result is None:
        result = apply_operator(tx, fn, [left, right])
    if int(instr.arg) & _COMPARE_TO_BOOL and not truth_tested_next(tx):  # 3.13: bool(result)
        result = ConstantVariable(bool(result.truth(tx)))
    tx.push(result)


@opcode("UNARY_NEGATIVE")
def unary_negative(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(apply_operator(tx, operator.neg, [tx.pop()]))


@opcode("UNARY_POSITIVE", max_version=(3, 11))
def unary_positive(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(apply_operator(tx, operator.pos, [tx.pop()]))


@opcode("UNARY_INVERT")
def unary_invert(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(apply_operator(tx, operator.invert, [tx.pop()]))


@opcode("UNARY_NOT")
def unary_not(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(ConstantVariable(not tx.pop().truth(tx)))


@opcode("IS_OP")
def is_op(tx: InstructionTranslator, instr: Instruction) -> None:
    right = tx.pop()
    left = tx.pop()
    tx.push(ConstantVariable(identical(left, right, tx) != bool(instr.arg)))


@opcode("CONTAINS_OP")
def contains_op(tx: InstructionTranslator, instr: Instruction) -> None:
    container = _as_collection(tx, tx.pop())
    item = tx.pop()
    if isinstance(container, SetVariable):
        if not item.is_constant():
            raise Unsupported(f"`in` a set of constants for {item}")
        tx.push(ConstantVariable((item.as_constant() in container.value) != bool(instr.arg)))
        return
    result = apply_operator(tx, operator.contains, [container, item])
    tx.push(ConstantVariable(result.as_constant() != bool(instr.arg)))


@opcode("BINARY_SUBSCR")
def binary_subscr(tx: InstructionTranslator, instr: Instruction) -> None:
    index = tx.pop()
    container = _as_collection(tx, tx.pop())
    if isinstance(container, (CounterVariable, DefaultDictVariable)) and index.is_constant() and \
            index.as_constant() not in container.items:
        if isinstance(container, CounterVariable):
            tx.push(ConstantVariable(0))  # Counter.__missing__: 0, not stored
            return
        container.missing(tx, index.as_constant())
    alias = _generic_alias(tx, container, index)
    if alias is not None:
        tx.push(alias)
        return
    if isinstance(container, PythonObjectVariable) and container.value is os.environ:
        tx.push(EnvironReadVariable("__getitem__").call(tx, [index], {}))
        return
    if isinstance(container, PythonObjectVariable) and isinstance(container.value, enum.EnumMeta) and \
            index.is_constant():
        try:  # `Color["RED"]`: the member of that name
            member: Any = container.value[index.as_constant()]
        except KeyError as error:
            raise Unsupported(f"KeyError: {error}", user_error=True) from error
        tx.push(tx.output.wrap_value(member, None))
        return
    if isinstance(container, DequeVariable) and index.is_constant() and isinstance(index.as_constant(), slice):
        message = "sequence index must be integer, not 'slice'"
        raise Unsupported(f"TypeError: {message}", user_error=True) from TypeError(message)
    tx.push(apply_operator(tx, operator.getitem, [container, index]))


@opcode("BINARY_SLICE", min_version=(3, 12))
def binary_slice(tx: InstructionTranslator, instr: Instruction) -> None:
    end = tx.pop()
    start = tx.pop()
    container = tx.pop()
    index = _make_slice([start, end])
    tx.push(apply_operator(tx, operator.getitem, [container, index]))


def _make_slice(parts: list[VariableTracker]) -> VariableTracker:
    if not all(p.is_constant() for p in parts):
        if all(p.is_constant() or isinstance(p, SymNodeVariable) for p in parts):
            return SymSliceVariable(parts)  # bounds computed from dynamic sizes
        raise Unsupported("slice with non-constant bounds")
    return ConstantVariable(slice(*[p.as_constant() for p in parts]))


@opcode("BUILD_SLICE")
def build_slice(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(_make_slice(tx.popn(instr.arg)))


@opcode("STORE_SUBSCR")
def store_subscr(tx: InstructionTranslator, instr: Instruction) -> None:
    index = tx.pop()
    container = tx.pop()
    _store_item(tx, container, index, tx.pop())


@opcode("STORE_SLICE", min_version=(3, 12))
def store_slice(tx: InstructionTranslator, instr: Instruction) -> None:
    end = tx.pop()
    start = tx.pop()
    container = tx.pop()
    _store_item(tx, container, _make_slice([start, end]), tx.pop())


def _store_item(tx: InstructionTranslator, container: VariableTracker, index: VariableTracker,
                value: VariableTracker) -> None:
    """`container[index] = value` (STORE_SUBSCR, and STORE_SLICE's `container[start:end] = value`)."""
    container = _as_collection(tx, container)
    if isinstance(container, TensorVariable):
        tx.output.call_graph("call_function", operator.setitem, [container, index, value], {})
        return
    if isinstance(container, NdarrayVariable):
        ndarray_setitem(tx, container, index, value)
        return
    if isinstance(container, ListVariable) and index.is_constant():
        try:
            container.items[index.as_constant()] = value
        except (IndexError, TypeError) as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        container.mark_mutated(tx)
        return
    if isinstance(container, ModelOutputVariable) and index.is_constant():
        container.setitem(index.as_constant(), value)
        return
    if isinstance(container, DictVariable) and index.is_constant():
        container.set_item(tx, index.as_constant(), value)
        return
    raise Unsupported(f"item assignment on {container}")


@opcode("DELETE_SUBSCR")
def delete_subscr(tx: InstructionTranslator, instr: Instruction) -> None:
    index = tx.pop()
    container = _as_collection(tx, tx.pop())
    if isinstance(container, ModelOutputVariable):
        raise Unsupported(f"deleting an item of a {container.cls.__name__}")  # eager raises: run it there
    if isinstance(container, (ListVariable, DictVariable)) and index.is_constant():
        try:
            del container.items[index.as_constant()]
        except (IndexError, KeyError, TypeError) as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        container.mark_mutated(tx)
        return
    raise Unsupported(f"deleting an item of {container}")
