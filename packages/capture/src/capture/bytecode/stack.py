"""Stack manipulation and no-op instructions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.bytecode.registry import Instruction, opcode
from capture.variables.base import NullVariable

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


@opcode("NOP", "RESUME", "PRECALL")
def nop(tx: InstructionTranslator, instr: Instruction) -> None:
    """Nothing to do symbolically."""


@opcode("POP_TOP")
def pop_top(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.pop()


@opcode("END_FOR", min_version=(3, 12))
def end_for(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.popn(2)


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
