"""Calls (CALL, CALL_KW, CALL_FUNCTION_EX, KW_NAMES) and function creation (MAKE_FUNCTION,
SET_FUNCTION_ATTRIBUTE). Where CALL keeps its NULL is the dialect's (`bytecode/dialects.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.bytecode.dialects import current
from capture.bytecode.registry import Instruction, opcode
from capture.variables.base import NullVariable, Unsupported, VariableTracker
from capture.variables.containers import DictVariable
from capture.variables.functions import NestedFunctionVariable

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


@opcode("KW_NAMES", max_version=(3, 12))
def kw_names(tx: InstructionTranslator, instr: Instruction) -> None:
    names = instr.arg
    if isinstance(names, int):
        names = tx.code.co_consts[names]
    tx.kw_names = tuple(names)


@opcode("CALL")
def call(tx: InstructionTranslator, instr: Instruction) -> None:
    names, tx.kw_names = tx.kw_names, ()
    _call(tx, int(instr.arg), names)


@opcode("CALL_KW", min_version=(3, 13))
def call_kw(tx: InstructionTranslator, instr: Instruction) -> None:
    """3.13: CALL whose keyword names are a tuple on the stack, above the arguments."""
    names = tx.pop().as_constant()
    _call(tx, int(instr.arg), tuple(names))


def _call(tx: InstructionTranslator, argc: int, kw_names: tuple[str, ...]) -> None:
    values = tx.popn(argc)
    upper = tx.pop()
    lower = tx.pop()
    fn, receiver = current().call_target(lower, upper, lambda slot: isinstance(slot, NullVariable))
    args = values if receiver is None else [receiver, *values]
    kwargs: dict[str, VariableTracker] = {}
    if kw_names:
        count = len(kw_names)
        kwargs = dict(zip(kw_names, args[-count:]))
        args = args[:-count]
    try:
        result = tx.call_function(fn, args, kwargs)
    except Unsupported as error:
        # Where the frame cannot resume at this call, its eager copy calls the callee through capture:
        # it must know which of CALL's two forms this is (the outermost frame's CALL sets it last).
        error.null_below = receiver is None  # type: ignore[attr-defined]
        raise
    tx.push(result)


@opcode("CALL_FUNCTION_EX")
def call_function_ex(tx: InstructionTranslator, instr: Instruction) -> None:
    kwargs_var = tx.pop() if int(instr.arg) & 1 else DictVariable({})
    args_var = tx.pop()
    if current().null_after_callable and tx.stack and isinstance(tx.stack[-1], NullVariable):
        tx.pop()
    fn = tx.pop()
    if not current().null_after_callable and tx.stack and isinstance(tx.stack[-1], NullVariable):
        tx.pop()
    if not isinstance(kwargs_var, DictVariable):
        raise Unsupported("**kwargs that is not a dict")
    args = args_var.iterate(tx)
    tx.push(tx.call_function(fn, args, dict(kwargs_var.items)))


@opcode("MAKE_FUNCTION", max_version=(3, 12))
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




@opcode("MAKE_FUNCTION", min_version=(3, 13))
def make_bare_function(tx: InstructionTranslator, instr: Instruction) -> None:
    """3.13: a function of the code object alone; SET_FUNCTION_ATTRIBUTE adds defaults and closure."""
    code = tx.pop().as_constant()
    tx.push(NestedFunctionVariable(code, code.co_qualname, tx.f_globals, [], {}, []))


@opcode("SET_FUNCTION_ATTRIBUTE", min_version=(3, 13))
def set_function_attribute(tx: InstructionTranslator, instr: Instruction) -> None:
    """3.13: set one of MAKE_FUNCTION's attributes (the flag says which) on the function on top."""
    flag = int(instr.arg)
    function = tx.pop()
    value = tx.pop()
    if not isinstance(function, NestedFunctionVariable):
        raise Unsupported(f"setting a function attribute on {function}")
    if flag == 0x08:
        function.closure = list(value.items)  # type: ignore[attr-defined]
    elif flag == 0x02:
        items = value.items  # type: ignore[attr-defined]
        function.kwdefaults = dict(items) if isinstance(items, dict) else {}
    elif flag == 0x01:
        function.defaults = list(value.items)  # type: ignore[attr-defined]
    elif flag != 0x04:  # annotations are not modelled (as MAKE_FUNCTION before 3.13 drops them)
        raise Unsupported(f"function attribute flag {flag:#x}")
    tx.push(function)
