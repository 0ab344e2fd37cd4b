"""raise, and the handler side of try/except: exceptions raised and caught inside the traced region.

A user error that eager Python would raise (a KeyError, a `raise ValueError(...)`) inside a `try`
block continues at the handler the exception table names (see `InstructionTranslator.step`);
these opcodes then run the handler symbolically. An exception no handler catches ends the graph,
and the instruction runs again in plain Python to raise it for real.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.bytecode.registry import Instruction, opcode
from capture.variables.base import ConstantVariable, ExceptionVariable, Unsupported, VariableTracker
from capture.variables.builtins import _class_of

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


def _exception_of(value: VariableTracker) -> BaseException:
    if isinstance(value, ExceptionVariable):
        return value.value
    cls = getattr(value, "value", getattr(value, "fn", None))
    if isinstance(cls, type) and issubclass(cls, BaseException):
        try:
            return cls()
        except Exception as error:
            raise Unsupported(f"cannot instantiate {cls.__name__}: {error}") from error
    raise Unsupported(f"raise of {value}")


@opcode("RAISE_VARARGS")
def raise_varargs(tx: InstructionTranslator, instr: Instruction) -> None:
    argc = int(instr.arg)
    if argc == 0:
        raise Unsupported("bare raise (re-raise)", user_error=True)
    values = tx.popn(argc)
    exception = _exception_of(values[0])
    raise Unsupported(f"{type(exception).__name__}: {exception}", user_error=True, exception=exception)


@opcode("PUSH_EXC_INFO")
def push_exc_info(tx: InstructionTranslator, instr: Instruction) -> None:
    exception = tx.pop()
    tx.push(ConstantVariable(None))  # the previous exception being handled (none inside the region)
    tx.push(exception)


@opcode("CHECK_EXC_MATCH")
def check_exc_match(tx: InstructionTranslator, instr: Instruction) -> None:
    classes = tx.pop()
    exception = tx.stack[-1]
    cls = classes.as_constant() if classes.is_constant() else _class_of(classes)
    tx.push(ConstantVariable(issubclass(exception.python_type(), cls)))


@opcode("POP_EXCEPT")
def pop_except(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.pop()


@opcode("RERAISE")
def reraise(tx: InstructionTranslator, instr: Instruction) -> None:
    exception = tx.pop()
    if isinstance(exception, ExceptionVariable):
        raise Unsupported(f"{type(exception.value).__name__}: {exception.value}", user_error=True,
                          exception=exception.value)
    raise Unsupported("re-raise of an unknown exception", user_error=True)
