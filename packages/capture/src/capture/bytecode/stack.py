"""Stack manipulation and no-op instructions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.bytecode.dialects import current
from capture.bytecode.registry import Instruction, opcode
from capture.variables.base import NullVariable, VariableTracker

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


@opcode("NOP", "RESUME")
def nop(tx: InstructionTranslator, instr: Instruction) -> None:
    """Nothing to do symbolically."""


@opcode("PRECALL", max_version=(3, 11))
def precall(tx: InstructionTranslator, instr: Instruction) -> None:
    """3.11: nothing to do symbolically (CALL does the call)."""


@opcode("POP_TOP")
def pop_top(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.pop()


@opcode("END_FOR", min_version=(3, 12), max_version=(3, 12))
def end_for(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.popn(2)


@opcode("END_FOR", min_version=(3, 13))
def end_for_value(tx: InstructionTranslator, instr: Instruction) -> None:
    """3.13: END_FOR pops the last value only; a POP_TOP of the iterator follows it."""
    tx.pop()


@opcode("PUSH_NULL")
def push_null(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(NullVariable())


@opcode("COPY")
def copy(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(tx.stack[-instr.arg])


@opcode("SWAP")
def swap(tx: InstructionTranslator, instr: Instruction) -> None:
    n = instr.arg
    tx.stack[-1], tx.stack[-n] = tx.stack[-n], tx.stack[-1]


def push_callable(tx: InstructionTranslator, value: VariableTracker) -> None:
    """Push `value` with the NULL of CALL's calling convention next to it (LOAD_GLOBAL's, LOAD_ATTR's NULL bit).

    Method loads push a bound method this way too: the trace never splits a method from its receiver.
    """
    for item in current().with_null([value], [NullVariable()]):
        tx.push(item)


def truth_tested_next(tx: InstructionTranslator) -> bool:
    """Whether the next instruction tests the truth of the top of the stack (the dialect's bool operands)."""
    following = tx.info.instructions[tx.ip] if tx.ip < len(tx.info.instructions) else None
    return following is not None and following.name in current().bool_operand
