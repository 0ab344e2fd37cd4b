"""Calls (CALL, CALL_FUNCTION_EX, KW_NAMES) and function creation (MAKE_FUNCTION)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.bytecode.registry import Instruction, opcode
from capture.variables.base import NullVariable, Unsupported, VariableTracker
from capture.variables.containers import DictVariable
from capture.variables.functions import NestedFunctionVariable

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


@opcode("KW_NAMES")
def kw_names(tx: InstructionTranslator, instr: Instruction) -> None:
    names = instr.arg
    if isinstance(names, int):
        names = tx.code.co_consts[names]
    tx.kw_names = tuple(names)


@opcode("CALL")
def call(tx: InstructionTranslator, instr: Instruction) -> None:
    argc = instr.arg
    values = tx.popn(argc)
    second = tx.pop()
    first = tx.pop()
    if isinstance(first, NullVariable):
        fn, args = second, values
    else:
        fn, args = first, [second, *values]
    kwargs: dict[str, VariableTracker] = {}
    if tx.kw_names:
        count = len(tx.kw_names)
        kwargs = dict(zip(tx.kw_names, args[-count:]))
        args = args[:-count]
        tx.kw_names = ()
    try:
        result = tx.call_function(fn, args, kwargs)
    except Unsupported as error:
        # Where the frame cannot resume at this call, its eager copy calls the callee through capture:
        # it must know which of CALL's two forms this is (the outermost frame's CALL sets it last).
        error.null_below = isinstance(first, NullVariable)  # type: ignore[attr-defined]
        raise
    tx.push(result)


@opcode("CALL_FUNCTION_EX")
def call_function_ex(tx: InstructionTranslator, instr: Instruction) -> None:
    kwargs_var = tx.pop() if int(instr.arg) & 1 else DictVariable({})
    args_var = tx.pop()
    fn = tx.pop()
    if tx.stack and isinstance(tx.stack[-1], NullVariable):
        tx.pop()
    if not isinstance(kwargs_var, DictVariable):
        raise Unsupported("**kwargs that is not a dict")
    args = args_var.iterate(tx)
    tx.push(tx.call_function(fn, args, dict(kwargs_var.items)))


@opcode("MAKE_FUNCTION")
def make_function(tx: InstructionTranslator, instr: Instruction) -> None:
    flags = int(instr.arg)
    code_var = tx.pop()
    code = code_var.as_constant()
    closure = tx.pop().items if flags & 0x08 else []  # type: ignore[attr-defined]
    if flags & 0x04:
        tx.pop()  # annotations
    kwdefaults = tx.pop().items if flags & 0x02 else {}  # type: ignore[attr-defined]
    defaults = tx.pop().items if flags & 0x01 else []  # type: ignore[attr-defined]
    if not isinstance(kwdefaults, dict):
        kwdefaults = {}
    tx.push(NestedFunctionVariable(code, code.co_qualname, tx.f_globals, list(defaults), dict(kwdefaults),
                                   list(closure)))


