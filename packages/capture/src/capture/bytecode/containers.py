"""Building and unpacking tuples, lists and dicts."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from capture.bytecode.registry import Instruction, opcode
from capture.symbolic.operators import apply_operator
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.collections_types import SetVariable, constant_elements
from capture.variables.containers import DictVariable, ListVariable, TupleVariable, iterator_over

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


@opcode("BUILD_TUPLE")
def build_tuple(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(TupleVariable(tx.popn(instr.arg)))


@opcode("BUILD_LIST")
def build_list(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(ListVariable(tx.popn(instr.arg)))


@opcode("BUILD_MAP")
def build_map(tx: InstructionTranslator, instr: Instruction) -> None:
    flat = tx.popn(2 * instr.arg)
    tx.push(DictVariable({flat[i].as_constant(): flat[i + 1] for i in range(0, len(flat), 2)}))


@opcode("BUILD_CONST_KEY_MAP")
def build_const_key_map(tx: InstructionTranslator, instr: Instruction) -> None:
    keys = tx.pop().as_constant()
    values = tx.popn(instr.arg)
    tx.push(DictVariable(dict(zip(keys, values))))


@opcode("LIST_APPEND")
def list_append(tx: InstructionTranslator, instr: Instruction) -> None:
    value = tx.pop()
    target = tx.stack[-instr.arg]
    if not isinstance(target, ListVariable):
        raise Unsupported("LIST_APPEND on a non-list")
    target.items.append(value)


@opcode("LIST_EXTEND")
def list_extend(tx: InstructionTranslator, instr: Instruction) -> None:
    value = tx.pop()
    target = tx.stack[-instr.arg]
    if not isinstance(target, ListVariable):
        raise Unsupported("LIST_EXTEND on a non-list")
    target.items.extend(value.iterate(tx))


@opcode("LIST_TO_TUPLE", max_version=(3, 11))
def list_to_tuple(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(TupleVariable(tx.pop().iterate(tx)))


@opcode("CALL_INTRINSIC_1", min_version=(3, 12))
def call_intrinsic_1(tx: InstructionTranslator, instr: Instruction) -> None:
    kind = getattr(instr.arg, "name", str(instr.arg))
    if kind == "INTRINSIC_LIST_TO_TUPLE":
        tx.push(TupleVariable(tx.pop().iterate(tx)))
    elif kind == "INTRINSIC_UNARY_POSITIVE":
        import operator

        tx.push(apply_operator(tx, operator.pos, [tx.pop()]))
    else:
        raise Unsupported(f"CALL_INTRINSIC_1 {kind}")


@opcode("MAP_ADD")
def map_add(tx: InstructionTranslator, instr: Instruction) -> None:
    value = tx.pop()
    key = tx.pop()
    target = tx.stack[-instr.arg]
    if not isinstance(target, DictVariable):
        raise Unsupported("MAP_ADD on a non-dict")
    target.items[key.as_constant()] = value


@opcode("DICT_UPDATE", "DICT_MERGE")
def dict_update(tx: InstructionTranslator, instr: Instruction) -> None:
    value = tx.pop()
    target = tx.stack[-instr.arg]
    if not isinstance(target, DictVariable) or not isinstance(value, DictVariable):
        raise Unsupported("dict update with a non-dict")
    target.items.update(value.items)


@opcode("UNPACK_SEQUENCE")
def unpack_sequence(tx: InstructionTranslator, instr: Instruction) -> None:
    items = tx.pop().iterate(tx)
    if len(items) != instr.arg:
        raise Unsupported(f"cannot unpack {len(items)} values into {instr.arg}", user_error=True)
    for item in reversed(items):
        tx.push(item)


@opcode("UNPACK_EX")
def unpack_ex(tx: InstructionTranslator, instr: Instruction) -> None:
    before, after = instr.arg if isinstance(instr.arg, tuple) else (instr.arg & 0xFF, instr.arg >> 8)
    items = tx.pop().iterate(tx)
    if len(items) < before + after:
        raise Unsupported("not enough values to unpack", user_error=True)
    middle = ListVariable(items[before:len(items) - after])
    values = items[:before] + [middle] + items[len(items) - after:]
    for item in reversed(values):
        tx.push(item)


@opcode("GET_ITER")
def get_iter(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(iterator_over(tx, tx.pop()))


_CONVERSIONS: dict[int, Callable[[Any], Any]] = {0: lambda raw: raw, 1: str, 2: repr, 3: ascii}


def _formatted_constant(value: VariableTracker) -> Any:
    if not value.is_constant():
        raise Unsupported("f-string of a traced value")
    return value.as_constant()


@opcode("FORMAT_VALUE", max_version=(3, 12))
def format_value(tx: InstructionTranslator, instr: Instruction) -> None:
    spec = tx.pop().as_constant() if (int(instr.arg) & 0x04) else ""
    raw = _formatted_constant(tx.pop())
    raw = _CONVERSIONS[int(instr.arg) & 0x03](raw)
    tx.push(ConstantVariable(format(raw, spec)))


@opcode("CONVERT_VALUE", min_version=(3, 13))
def convert_value(tx: InstructionTranslator, instr: Instruction) -> None:
    """3.13: `!s`, `!r`, `!a` of an f-string field."""
    tx.push(ConstantVariable(_CONVERSIONS[int(instr.arg)](_formatted_constant(tx.pop()))))


@opcode("FORMAT_SIMPLE", min_version=(3, 13))
def format_simple(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(ConstantVariable(format(_formatted_constant(tx.pop()), "")))


@opcode("FORMAT_WITH_SPEC", min_version=(3, 13))
def format_with_spec(tx: InstructionTranslator, instr: Instruction) -> None:
    spec = tx.pop().as_constant()
    tx.push(ConstantVariable(format(_formatted_constant(tx.pop()), spec)))


@opcode("BUILD_STRING")
def build_string(tx: InstructionTranslator, instr: Instruction) -> None:
    parts = tx.popn(instr.arg)
    tx.push(ConstantVariable("".join(p.as_constant() for p in parts)))


@opcode("BUILD_SET")
def build_set(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(SetVariable(set(constant_elements(tx, tx.popn(instr.arg), "a set"))))


@opcode("SET_ADD")
def set_add(tx: InstructionTranslator, instr: Instruction) -> None:
    value = tx.pop()
    target = tx.stack[-instr.arg]
    if not isinstance(target, SetVariable):
        raise Unsupported("SET_ADD on a non-set")
    target.value.update(constant_elements(tx, [value], "a set"))


@opcode("SET_UPDATE")
def set_update(tx: InstructionTranslator, instr: Instruction) -> None:
    value = tx.pop()
    target = tx.stack[-instr.arg]
    if not isinstance(target, SetVariable):
        raise Unsupported("SET_UPDATE on a non-set")
    if value.is_constant():
        target.value.update(value.as_constant())
    else:
        target.value.update(constant_elements(tx, value.iterate(tx), "a set"))
