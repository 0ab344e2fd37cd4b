"""Jumps, loops, returns and with-blocks."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from capture.bytecode.registry import Handler, Instruction, opcode
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.containers import IteratorVariable
from capture.variables.objects import GradModeVariable

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
                           ("POP_JUMP_IF_", ((3, 12), (3, 12)))):
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
    target = tx.info.target(instr)
    if tx.info.instructions[target].name == "END_FOR":
        target += 1  # 3.12 skips END_FOR when the iterator is exhausted
    tx.ip = target


@opcode("RETURN_VALUE")
def return_value(tx: InstructionTranslator, instr: Instruction) -> None:
    from capture.symbolic.translator import ReturnSignal

    raise ReturnSignal(tx.pop())


@opcode("BEFORE_WITH")
def before_with(tx: InstructionTranslator, instr: Instruction) -> None:
    context = tx.pop()
    from capture.variables.autocast import AutocastVariable
    from capture.variables.context_managers import GeneratorContextVariable

    if isinstance(context, GeneratorContextVariable):
        exit_variable, entered = context.enter(tx)
        tx.push(exit_variable)
        tx.push(entered)
        return

    if isinstance(context, (GradModeVariable, AutocastVariable)):
        tx.push(context.enter(tx))
        tx.push(ConstantVariable(None))
        return
    from capture.variables.objects import PythonObjectVariable
    from capture.variables.user_objects import NewObjectVariable

    if isinstance(context, (NewObjectVariable, PythonObjectVariable)):
        cls = context.python_type()
        enter, exit_ = getattr(cls, "__enter__", None), getattr(cls, "__exit__", None)
        if isinstance(enter, types.FunctionType) and isinstance(exit_, types.FunctionType):
            from capture.variables.functions import BoundMethodVariable, UserFunctionVariable

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
        from capture.variables.context_managers import YieldSignal

        raise YieldSignal(value)
    tx.yielded.append(value)
