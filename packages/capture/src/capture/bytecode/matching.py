"""`match` statements: the sequence, mapping, key and class patterns (MATCH_*, GET_LEN)."""

from __future__ import annotations

import collections.abc
from typing import TYPE_CHECKING, Any

from capture.bytecode.registry import Instruction, opcode
from capture.symbolic.attributes import get_attribute
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.builtins import BUILTIN_HANDLERS, _class_of
from capture.variables.containers import DictVariable, TupleVariable

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator

# Classes whose single positional sub-pattern matches the subject itself (`case int(x)`).
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


def _subject_type(value: VariableTracker) -> type:
    try:
        return value.python_type()
    except Unsupported:
        return object


@opcode("MATCH_SEQUENCE")
def match_sequence(tx: InstructionTranslator, instr: Instruction) -> None:
    kind = _subject_type(tx.stack[-1])
    is_sequence = issubclass(kind, collections.abc.Sequence) and not issubclass(kind, (str, bytes, bytearray))
    tx.push(ConstantVariable(is_sequence))


@opcode("MATCH_MAPPING")
def match_mapping(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(ConstantVariable(issubclass(_subject_type(tx.stack[-1]), collections.abc.Mapping)))


@opcode("GET_LEN")
def get_len(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(BUILTIN_HANDLERS[len](tx, [tx.stack[-1]], {}))


@opcode("MATCH_KEYS")
def match_keys(tx: InstructionTranslator, instr: Instruction) -> None:
    keys, subject = tx.stack[-1].as_constant(), tx.stack[-2]
    if not isinstance(subject, DictVariable):
        raise Unsupported(f"mapping pattern on {subject}")
    if all(key in subject.items for key in keys):
        tx.push(TupleVariable([subject.items[key] for key in keys]))
    else:
        tx.push(ConstantVariable(None))


@opcode("MATCH_CLASS")
def match_class(tx: InstructionTranslator, instr: Instruction) -> None:
    names, cls_var, subject = tx.pop().as_constant(), tx.pop(), tx.pop()
    cls: Any = cls_var.as_constant() if cls_var.is_constant() else _class_of(cls_var)
    if not isinstance(cls, type):
        raise Unsupported("TypeError: called match pattern must be a class", user_error=True)
    if not issubclass(_subject_type(subject), cls):
        tx.push(ConstantVariable(None))
        return
    count = int(instr.arg)
    if count and cls in _SELF_MATCHING:
        positional: list[str | None] = [None]
    else:
        match_args = getattr(cls, "__match_args__", ())
        if count > len(match_args):
            raise Unsupported(f"TypeError: {cls.__name__}() accepts {len(match_args)} positional sub-patterns",
                              user_error=True)
        positional = list(match_args[:count])
    values: list[VariableTracker] = []
    for name in [*positional, *names]:
        if name is None:
            values.append(subject)
            continue
        try:
            values.append(get_attribute(tx, subject, name))
        except Unsupported as error:
            if not error.user_error:
                raise
            tx.push(ConstantVariable(None))  # a missing attribute: the pattern does not match
            return
    tx.push(TupleVariable(values))
