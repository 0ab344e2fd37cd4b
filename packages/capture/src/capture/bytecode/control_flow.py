"""Jumps, loops, returns and with-blocks."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from capture.bytecode.dialects import NEWEST, current
from capture.bytecode.registry import Handler, Instruction, opcode
from capture.bytecode.stack import truth_tested_next
from capture.symbolic.translator import ReturnSignal
from capture.variables.autocast import AutocastVariable
from capture.variables.base import ConstantVariable, ExceptionVariable, Unsupported, VariableTracker
from capture.variables.containers import IteratorVariable
from capture.variables.context_managers import GeneratorContextVariable, GradModeVariable, YieldSignal
from capture.variables.functions import BoundMethodVariable, UserFunctionVariable
from capture.variables.objects import PythonObjectVariable
from capture.variables.user_objects import NewObjectVariable

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


@opcode("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def jump(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.jump_to(instr)


def _is_none(value: VariableTracker) -> bool:
    if value.is_constant():
        return value.as_constant() is None
    return False


def _conditional(jump_if: bool, test: str) -> Handler:
    def handler(tx: InstructionTranslator, instr: Instruction) -> None:
        value = tx.stack[-1]
        outcome = _is_none(value) if test == "none" else (not _is_none(value)) if test == "not_none" \
            else value.truth(tx)
        tx.pop()
        if outcome == jump_if:
            tx.jump_to(instr)

    return handler


for _prefix, _versions in (("POP_JUMP_FORWARD_IF_", ((3, 11), (3, 11))),
                           ("POP_JUMP_BACKWARD_IF_", ((3, 11), (3, 11))),
                           ("POP_JUMP_IF_", ((3, 12), NEWEST))):
    opcode(_prefix + "TRUE", min_version=_versions[0], max_version=_versions[1])(_conditional(True, "truth"))
    opcode(_prefix + "FALSE", min_version=_versions[0], max_version=_versions[1])(_conditional(False, "truth"))
    opcode(_prefix + "NONE", min_version=_versions[0], max_version=_versions[1])(_conditional(True, "none"))
    opcode(_prefix + "NOT_NONE", min_version=_versions[0], max_version=_versions[1])(_conditional(True, "not_none"))


@opcode("JUMP_IF_TRUE_OR_POP", "JUMP_IF_FALSE_OR_POP", max_version=(3, 11))
def jump_or_pop(tx: InstructionTranslator, instr: Instruction) -> None:
    value = tx.stack[-1]
    truth = value.truth(tx)
    if truth == (instr.name == "JUMP_IF_TRUE_OR_POP"):
        tx.jump_to(instr)
    else:
        tx.pop()


@opcode("FOR_ITER")
def for_iter(tx: InstructionTranslator, instr: Instruction) -> None:
    iterator = tx.stack[-1]
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported(f"iteration over {iterator}")
    item = iterator.next_item()
    if item is not None:
        tx.push(item)
        return
    tx.pop()
    # Exhausted: 3.12 also skips the END_FOR at the target, 3.13 END_FOR and the POP_TOP after it.
    tx.ip = tx.info.target(instr) + current().for_iter_exhausted_skip


@opcode("TO_BOOL", min_version=(3, 13))
def to_bool(tx: InstructionTranslator, instr: Instruction) -> None:
    """3.13: `bool(value)` before a conditional jump or `not`: those test the value's truth themselves."""
    if not truth_tested_next(tx):
        value = tx.pop()
        tx.push(ConstantVariable(bool(value.truth(tx))))


@opcode("RETURN_VALUE")
def return_value(tx: InstructionTranslator, instr: Instruction) -> None:
    raise ReturnSignal(tx.pop())


@opcode("BEFORE_WITH")
def before_with(tx: InstructionTranslator, instr: Instruction) -> None:
    context = tx.pop()
    enter_with = getattr(context, "enter_with", None)  # contextlib.suppress, nullcontext
    if enter_with is not None:
        exit_variable, entered = enter_with(tx)
        tx.push(exit_variable)
        tx.push(entered)
        return
    if isinstance(context, GeneratorContextVariable):
        exit_variable, entered = context.enter(tx)
        tx.push(exit_variable)
        tx.push(entered)
        return

    if isinstance(context, (GradModeVariable, AutocastVariable)):
        tx.push(context.enter(tx))
        tx.push(ConstantVariable(None))
        return
    if isinstance(context, (NewObjectVariable, PythonObjectVariable)):
        cls = context.python_type()
        enter, exit_ = getattr(cls, "__enter__", None), getattr(cls, "__exit__", None)
        if isinstance(enter, types.FunctionType) and isinstance(exit_, types.FunctionType):
            entered = UserFunctionVariable(enter).call(tx, [context], {})
            tx.push(BoundMethodVariable(UserFunctionVariable(exit_), context))
            tx.push(entered)
            return
    raise Unsupported(f"with-block over {context}")


@opcode("RETURN_GENERATOR")
def return_generator(tx: InstructionTranslator, instr: Instruction) -> None:
    if tx.yielded is None:
        raise Unsupported("generators are not captured as frames of their own")
    tx.push(ConstantVariable(None))


_MAX_YIELDS = 10_000


@opcode("YIELD_VALUE")
def yield_value(tx: InstructionTranslator, instr: Instruction) -> None:
    if tx.yielded is None:
        raise Unsupported("yield outside an inlined generator")
    if len(tx.yielded) >= _MAX_YIELDS:
        raise Unsupported(f"generator yielded more than {_MAX_YIELDS} values (infinite?)")
    value = tx.pop()
    tx.push(ConstantVariable(None))
    if tx.suspend_on_yield:
        raise YieldSignal(value)
    tx.yielded.append(value)


@opcode("WITH_EXCEPT_START")
def with_except_start(tx: InstructionTranslator, instr: Instruction) -> None:
    """An exception left a with-block: call `__exit__(type, exc, traceback)` (4th on the stack), push its result."""
    exception = tx.stack[-1]
    if not isinstance(exception, ExceptionVariable):
        raise Unsupported("an unknown exception leaving a with-block")
    exit_callable = tx.stack[-4]
    kind = tx.output.wrap_value(type(exception.value), None)
    tx.push(exit_callable.call(tx, [kind, exception, ConstantVariable(None)], {}))


@opcode("GET_YIELD_FROM_ITER")
def get_yield_from_iter(tx: InstructionTranslator, instr: Instruction) -> None:
    """`yield from iterable` in a generator being inlined: iterate it."""
    if tx.yielded is None or tx.suspend_on_yield:
        raise Unsupported("yield from outside an inlined generator")
    value = tx.pop()
    tx.push(value if isinstance(value, IteratorVariable) else IteratorVariable(value.iterate(tx)))


@opcode("SEND")
def send(tx: InstructionTranslator, instr: Instruction) -> None:
    """Resume the delegate of `yield from` with the sent value (always None here): its next item, or done."""
    sent = tx.pop()
    iterator = tx.stack[-1]
    if not isinstance(iterator, IteratorVariable) or not (sent.is_constant() and sent.as_constant() is None):
        raise Unsupported("send() into a generator")
    item = iterator.next_item()
    if item is not None:
        tx.push(item)
        return
    # Exhausted: the delegate's return value replaces the iterator (3.11), or sits on it until END_SEND (3.12).
    target = tx.info.target(instr)
    after = tx.info.instructions[target]
    if after.name == "END_SEND":
        after = tx.info.instructions[target + 1]
    else:
        tx.pop()
    if after.name != "POP_TOP":
        raise Unsupported("the return value of a generator delegated to with `yield from`")
    tx.push(ConstantVariable(None))
    tx.ip = target


@opcode("END_SEND", min_version=(3, 12))
def end_send(tx: InstructionTranslator, instr: Instruction) -> None:
    """Drop the exhausted delegate under the result of `yield from`."""
    value = tx.pop()
    tx.pop()
    tx.push(value)
