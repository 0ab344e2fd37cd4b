"""Loads and stores: locals, constants, globals, closure cells and attributes."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

import torch
from bytecode import CellVar, FreeVar

from capture.bytecode.registry import Instruction, opcode
from capture.bytecode.stack import push_callable
from capture.sources import AttrSource, GlobalSource, ItemSource, Source
from capture.symbolic.attributes import get_attribute
from capture.symbolic.translator import ReturnSignal
from capture.variables.base import (
    ConstantVariable,
    NullVariable,
    Unsupported,
    VariableTracker,
    wrapped_class,
)
from capture.variables.containers import TupleVariable
from capture.variables.functional import SuperVariable
from capture.variables.functions import CellVariable, RealCellVariable
from capture.variables.model_output import ModelOutputVariable
from capture.variables.objects import NNModuleVariable, PythonObjectVariable
from capture.variables.tensor import TensorVariable
from capture.variables.user_objects import NewObjectVariable

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


def _name(arg: Any) -> str:
    return arg if isinstance(arg, str) else arg.name


@opcode("LOAD_FAST", "LOAD_FAST_CHECK")
def load_fast(tx: InstructionTranslator, instr: Instruction) -> None:
    name = _name(instr.arg)
    if isinstance(instr.arg, (CellVar, FreeVar)) or name in tx.code.co_cellvars or name in tx.code.co_freevars:
        load_closure(tx, instr)  # 3.13: LOAD_CLOSURE is a LOAD_FAST of the slot that holds the cell
        return
    _push_local(tx, name)


def _push_local(tx: InstructionTranslator, name: str) -> None:
    if name not in tx.locals:
        raise Unsupported(f"local variable '{name}' referenced before assignment", user_error=True)
    tx.push(tx.locals[name])


def _store_local(tx: InstructionTranslator, name: str) -> None:
    value = tx.pop()
    if isinstance(value, NullVariable):
        tx.locals.pop(name, None)
    else:
        tx.locals[name] = value


@opcode("LOAD_FAST_LOAD_FAST", min_version=(3, 13))
def load_fast_load_fast(tx: InstructionTranslator, instr: Instruction) -> None:
    first, second = instr.arg
    _push_local(tx, _name(first))
    _push_local(tx, _name(second))


@opcode("STORE_FAST_LOAD_FAST", min_version=(3, 13))
def store_fast_load_fast(tx: InstructionTranslator, instr: Instruction) -> None:
    stored, loaded = instr.arg
    _store_local(tx, _name(stored))
    _push_local(tx, _name(loaded))


@opcode("STORE_FAST_STORE_FAST", min_version=(3, 13))
def store_fast_store_fast(tx: InstructionTranslator, instr: Instruction) -> None:
    """The top of the stack goes to the first name, the value below it to the second."""
    first, second = instr.arg
    _store_local(tx, _name(first))
    _store_local(tx, _name(second))


@opcode("LOAD_FAST_AND_CLEAR", min_version=(3, 12))
def load_fast_and_clear(tx: InstructionTranslator, instr: Instruction) -> None:
    name = _name(instr.arg)
    tx.push(tx.locals.pop(name, NullVariable()))


@opcode("STORE_FAST")
def store_fast(tx: InstructionTranslator, instr: Instruction) -> None:
    _store_local(tx, _name(instr.arg))


@opcode("DELETE_FAST")
def delete_fast(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.locals.pop(_name(instr.arg), None)


@opcode("LOAD_CONST")
def load_const(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(_wrap_const(instr.arg))


def _wrap_const(value: Any) -> VariableTracker:
    if type(value) is tuple:
        return TupleVariable([_wrap_const(v) for v in value])
    return ConstantVariable(value)


@opcode("RETURN_CONST", min_version=(3, 12))
def return_const(tx: InstructionTranslator, instr: Instruction) -> None:
    raise ReturnSignal(_wrap_const(instr.arg))


@opcode("LOAD_GLOBAL")
def load_global(tx: InstructionTranslator, instr: Instruction) -> None:
    push_null, name = instr.arg if isinstance(instr.arg, tuple) else (False, instr.arg)
    value = load_global_value(tx, name)
    if push_null:
        push_callable(tx, value)
    else:
        tx.push(value)


def load_global_value(tx: InstructionTranslator, name: str) -> VariableTracker:
    """A global (or builtin) by name, guarded when it is a module global of the root frame."""
    if tx.f_globals is tx.output.f_globals and name in tx.output.side_effects.global_stores:
        return tx.output.side_effects.global_stores[name]
    if name in tx.f_globals:
        source: Source | None = GlobalSource(name) if tx.f_globals is tx.output.f_globals else None
        key = (id(tx.f_globals), name)
        cached = tx.output._wrapped.get(key)
        if cached is not None:
            return cached
        value = tx.f_globals[name]
        if source is None:
            # A global of another module (an inlined callee's): guarded through a private source.
            tx.output.keepalive.append(tx.f_globals)
            holder = f"__kiln_globals_{id(tx.f_globals)}"
            tx.output.guards.constants[holder] = tx.f_globals
            source = ItemSource(_NamedSource(holder), name)
        tracker = tx.output.wrap_value(value, source)
        tx.output._wrapped[key] = tracker
        return tracker
    builtins_dict = tx.f_globals.get("__builtins__", builtins.__dict__)
    if not isinstance(builtins_dict, dict):
        builtins_dict = builtins_dict.__dict__
    if name not in builtins_dict:
        raise Unsupported(f"name '{name}' is not defined", user_error=True)
    return tx.output.wrap_value(builtins_dict[name], None)


class _NamedSource(GlobalSource):
    """A value bound under `name` in the generated functions' namespace (not in the user's globals)."""

    def expr(self) -> str:
        return self.name


@opcode("STORE_GLOBAL")
def store_global(tx: InstructionTranslator, instr: Instruction) -> None:
    if tx.f_globals is not tx.output.f_globals:
        raise Unsupported("storing a global of another module")
    name = _name(instr.arg)
    value = tx.pop()
    tx.output.side_effects.global_stores[name] = value
    tx.output._wrapped.pop((id(tx.f_globals), name), None)


@opcode("LOAD_DEREF")
def load_deref(tx: InstructionTranslator, instr: Instruction) -> None:
    cell = tx.cells.get(_name(instr.arg))
    if isinstance(cell, CellVariable):
        if cell.contents is None:
            raise Unsupported(f"free variable '{_name(instr.arg)}' referenced before assignment", user_error=True)
        tx.push(cell.contents)
    elif isinstance(cell, RealCellVariable):
        if cell.pending is not None:
            tx.push(cell.pending)
            return
        cell.was_read = True
        try:
            contents = cell.cell.cell_contents
        except ValueError as error:
            raise Unsupported(str(error), user_error=True) from error
        source = cell.source
        if source is not None and not source.expr().endswith("cell_contents"):
            source = AttrSource(source, "cell_contents")
        tx.push(tx.output.wrap_value(contents, source))
    else:
        raise Unsupported(f"closure variable {_name(instr.arg)}")


@opcode("STORE_DEREF")
def store_deref(tx: InstructionTranslator, instr: Instruction) -> None:
    cell = tx.cells.get(_name(instr.arg))
    value = tx.pop()
    if isinstance(cell, CellVariable):
        cell.contents = value
    elif isinstance(cell, RealCellVariable):
        cell.pending = value
        if all(c is not cell for c in tx.output.side_effects.cells):
            tx.output.side_effects.cells.append(cell)
    else:
        raise Unsupported(f"closure variable {_name(instr.arg)}")


@opcode("LOAD_CLOSURE")
def load_closure(tx: InstructionTranslator, instr: Instruction) -> None:
    cell = tx.cells.get(_name(instr.arg))
    if cell is None:
        raise Unsupported(f"closure cell {_name(instr.arg)}")
    tx.push(cell)


@opcode("MAKE_CELL")
def make_cell(tx: InstructionTranslator, instr: Instruction) -> None:
    name = _name(instr.arg)
    tx.cells[name] = CellVariable(tx.locals.get(name))


@opcode("COPY_FREE_VARS")
def copy_free_vars(tx: InstructionTranslator, instr: Instruction) -> None:
    """Closure cells are set up by the translator."""


@opcode("LOAD_ATTR")
def load_attr(tx: InstructionTranslator, instr: Instruction) -> None:
    is_method, name = instr.arg if isinstance(instr.arg, tuple) else (False, instr.arg)
    owner = tx.pop()
    value = get_attribute(tx, owner, name)
    if is_method:
        push_callable(tx, value)
    else:
        tx.push(value)


@opcode("LOAD_METHOD", max_version=(3, 11))
def load_method(tx: InstructionTranslator, instr: Instruction) -> None:
    owner = tx.pop()
    push_callable(tx, get_attribute(tx, owner, _name(instr.arg)))


@opcode("STORE_ATTR")
def store_attr(tx: InstructionTranslator, instr: Instruction) -> None:
    owner = tx.pop()
    value = tx.pop()
    name = _name(instr.arg)
    if isinstance(owner, NewObjectVariable):
        owner.setattr(tx, name, value)
        return
    if isinstance(owner, TensorVariable) and not hasattr(torch.Tensor, name) and not name.startswith("__"):
        # A plain Python attribute on a tensor (`t.tag = ...`): read back from the region, set after the graph.
        tx.output.side_effects.store_attribute(owner, name, value)
        return
    if isinstance(owner, ModelOutputVariable):
        owner.setattr(name, value)
        return
    if not isinstance(owner, (NNModuleVariable, PythonObjectVariable)) or owner.source is None:
        raise Unsupported(f"storing attribute {name!r} on {owner}")
    if isinstance(owner, NNModuleVariable) and isinstance(value, TensorVariable) and \
            (name in owner.module._buffers or name in owner.module._parameters):
        current = owner.getattr(tx, name)
        if isinstance(current, TensorVariable) and current.example is value.example:
            return  # `self.buf += x`: the in-place update already happened; rebinding the same tensor
    if isinstance(owner, NNModuleVariable) and owner.source is not None and name in owner.module._modules and \
            isinstance(value, NNModuleVariable):
        tx.output.side_effects.store_attribute(owner, name, value)  # swapping a submodule: set after the graph
        return
    if isinstance(owner, NNModuleVariable) and (name in owner.module._parameters or name in owner.module._modules
                                                or name in owner.module._buffers):
        raise Unsupported(f"replacing parameter, buffer or submodule {name!r} of a module")
    target = owner.module if isinstance(owner, NNModuleVariable) else owner.value
    descriptor = getattr(type(target), name, None)
    if descriptor is not None and hasattr(type(descriptor), "__set__"):
        raise Unsupported(f"attribute {name!r} is set through a descriptor (property or slot)")
    if isinstance(value, TensorVariable) and isinstance(owner, NNModuleVariable) and \
            isinstance(getattr(owner.module, name, None), torch.nn.Parameter):
        raise Unsupported(f"storing a tensor on parameter attribute {name!r}")
    tx.output.side_effects.store_attribute(owner, name, value)


@opcode("IMPORT_NAME")
def import_name(tx: InstructionTranslator, instr: Instruction) -> None:
    fromlist = tx.pop().as_constant()
    level = tx.pop().as_constant()
    module = __import__(_name(instr.arg), tx.f_globals, None, fromlist, level)
    tx.push(tx.output.wrap_value(module, None))


@opcode("IMPORT_FROM")
def import_from(tx: InstructionTranslator, instr: Instruction) -> None:
    module = tx.stack[-1]
    tx.push(module.getattr(tx, _name(instr.arg)))


@opcode("LOAD_ASSERTION_ERROR")
def load_assertion_error(tx: InstructionTranslator, instr: Instruction) -> None:
    tx.push(tx.output.wrap_value(AssertionError, None))


@opcode("LOAD_SUPER_ATTR", min_version=(3, 12))
def load_super_attr(tx: InstructionTranslator, instr: Instruction) -> None:
    arg = instr.arg
    name = next(a for a in arg if isinstance(a, str)) if isinstance(arg, tuple) else str(arg)
    flags = [a for a in arg if isinstance(a, bool)] if isinstance(arg, tuple) else []
    receiver = tx.pop()
    cls = tx.pop()
    tx.pop()  # the global `super`
    cls_value = cls.as_constant() if cls.is_constant() else wrapped_class(cls)
    if not isinstance(cls_value, type):
        raise Unsupported("super() with an unknown class", resumable=False)
    value = SuperVariable(cls_value, receiver).getattr(tx, name)
    if flags and flags[0]:
        push_callable(tx, value)
    else:
        tx.push(value)
