"""Generated code objects: resume functions and break stubs (assembled with the `bytecode` library).

A *resume function* for instruction `t` of a code object takes the value stack and the live
locals as arguments, pushes the stack back and jumps to `t`: the rest of the original function.

A *break stub* runs the one instruction capture could not trace (a call into numpy, a branch on a
tensor's value, ...) in plain Python, then calls the resume function of the instruction that runs
next (both successors for a conditional jump) and returns its result.
"""

from __future__ import annotations

import functools
import inspect
import types
from dataclasses import dataclass
from typing import Any, cast

from bytecode import Bytecode, Instr, Label

from capture.bytecode.assemble import assemble
from capture.bytecode.dialects import current
from capture.symbolic.code_info import code_info

STACK_PREFIX = "__kiln_stack"
CLOSURE_ARG = "__kiln_closure"  # a break stub's last argument when the frame has free variables


@dataclass(frozen=True)
class ResumeOrigin:
    """Maps instruction indices of a generated resume code object back to the original code."""

    original: types.CodeType
    index_map: tuple[int, ...]  # resume instruction index -> original index (-1: generated prologue)

    def original_index(self, index: int) -> int:
        """Original instruction index of instruction `index` of the resume code."""
        return self.index_map[index]


ORIGINS: dict[types.CodeType, ResumeOrigin] = {}
"""Resume code object -> where it came from (so breaks in resume functions map back)."""


def invoke(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Stands in for the NULL of CALL's calling convention when a stack is rebuilt."""
    return fn(*args, **kwargs)


def call_resume(resume: Any, stack: tuple[Any, ...], local_values: tuple[Any, ...]) -> Any:
    """Called by break stubs: continue in the resume function (locals first: see `resume_code`)."""
    return resume(*local_values, *stack)


def call_resume_in(resume: Any, stack: tuple[Any, ...], local_values: tuple[Any, ...], closure: tuple[Any, ...]) -> Any:
    """`call_resume` for a function with free variables: the resume code runs over the cells of the
    call that broke (`resume` is a `context.ClosureResume`), not those of the call that compiled it."""
    return resume.bind(closure)(*local_values, *stack)


def _stack_names(depth: int) -> list[str]:
    return [f"{STACK_PREFIX}{i}" for i in range(depth)]


def _load_stack(depth: int, null_slots: frozenset[int], location: Any = None) -> list[Instr]:
    """Push the stack arguments back; a NULL of CALL's calling convention is pushed as a real NULL.

    Its argument (`invoke`, what the entry passes for it) is left unread, so the restored stack is
    exactly the one the original frame had (a call traced from it sees `f(...)`, not `invoke(f, ...)`).
    """
    return [Instr("PUSH_NULL", location=location) if i in null_slots else Instr("LOAD_FAST", name, location=location)
            for i, name in enumerate(_stack_names(depth))]


@functools.lru_cache(maxsize=1024)
def resume_code(original: types.CodeType, target: int, stack_depth: int, local_names: tuple[str, ...],
                null_slots: frozenset[int] = frozenset()) -> types.CodeType:
    """The code object of the resume function at instruction `target` of `original`.

    Cell variables arrive as cell objects (so closures made before the break share them): their
    MAKE_CELL instructions are dropped. `null_slots` are the stack positions holding CALL's NULL.
    """
    # Handler depths come from the original: flowing from the prologue's jump never reaches the
    # start of a try block the resume point lies in (see `assemble`).
    bytecode = Bytecode.from_code(original, conserve_exception_block_stackdepth=True)
    original_position: dict[int, int] = {}
    real = -1
    label = Label()
    items: list[Any] = []
    prologue_done = False
    for item in bytecode:
        if isinstance(item, Instr):
            real += 1
            original_position[id(item)] = real
            if real == target:
                items.append(label)
            if item.name == "MAKE_CELL":
                continue
            items.append(item)
            if item.name == "RESUME" and not prologue_done:
                prologue_done = True
                items += _load_stack(stack_depth, null_slots)
                items.append(Instr("JUMP_FORWARD", label))
        else:
            items.append(item)
    if target > real:
        raise ValueError(f"no instruction {target} in {original.co_name}")
    bytecode.clear()
    bytecode.extend(items)
    # The locals come first: zero-argument super() reads the frame's first local as its `self`, and
    # the caller puts the original first argument first among `local_names`.
    bytecode.argnames = [*local_names, *_stack_names(stack_depth)]
    bytecode.argcount = len(bytecode.argnames)
    bytecode.posonlyargcount = 0
    bytecode.kwonlyargcount = 0
    bytecode.flags = bytecode.flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    # Named as the user's function: an exception raised in the rest of it shows their name in the
    # traceback (the code objects stay distinct; ORIGINS maps each back to its original).
    bytecode.name = original.co_name
    bytecode.qualname = original.co_qualname
    code = assemble(bytecode, at_least=original.co_stacksize, keep_handler_depths=True)
    index_map = tuple(original_position.get(id(item), -1) for item in items if isinstance(item, Instr))
    ORIGINS[code] = ResumeOrigin(_root(original), index_map)
    return code


def _root(code: types.CodeType) -> types.CodeType:
    origin = ORIGINS.get(code)
    return origin.original if origin is not None else code


def _forward_name(name: str) -> str:
    return name.replace("BACKWARD", "FORWARD")


def stub_code(original: types.CodeType, index: int, stack_depth: int, local_names: tuple[str, ...],
              kw_names: tuple[str, ...], resumes: dict[str, tuple[Any, int, tuple[str, ...]]],
              null_slots: frozenset[int] = frozenset(), closure: bool = False) -> types.CodeType:
    """The code object of the break stub for instruction `index` of `original`.

    `resumes` maps "next" (fall-through) and "jump" to (resume callable, stack depth, local names).
    `null_slots`: stack positions the instruction itself consumes as CALL's NULL (pushed as a real
    NULL; CALL_FUNCTION_EX requires one below its callable). NULLs deeper in the stack stay `invoke`:
    the stub hands its whole stack on to the resume function as a tuple. `closure`: the stub takes
    the frame's closure as its last argument and binds the resume functions to it (`call_resume_in`).
    """
    info = code_info(original)
    instr = info.instructions[index]
    body: list[Any] = [Instr("RESUME", 0, location=instr.location)]
    body += _load_stack(stack_depth, null_slots, instr.location)
    if instr.name == "CALL":  # (3.13's CALL_KW has its names on the stack)
        if kw_names and current().kw_names_instruction:
            body.append(Instr("KW_NAMES", cast(Any, kw_names), location=instr.location))
        if current().precall:
            body.append(Instr("PRECALL", instr.arg, location=instr.location))
    if instr.name in current().bool_operand:  # the trace left the value itself there, not its bool
        body.append(Instr("TO_BOOL", location=instr.location))
    jump_label = Label()
    if isinstance(instr.arg, Label):
        body.append(Instr(_forward_name(instr.name), jump_label, location=instr.location))
    else:
        body.append(Instr(instr.name, instr.arg, location=instr.location))
    if "next" in resumes:
        body += _epilogue(resumes["next"], instr, closure)
    if "jump" in resumes:
        body.append(jump_label)
        body += _epilogue(resumes["jump"], instr, closure)
    bytecode = Bytecode(body)
    bytecode.argnames = [*_stack_names(stack_depth), *local_names, *([CLOSURE_ARG] if closure else [])]
    bytecode.argcount = len(bytecode.argnames)
    bytecode.name = original.co_name  # the user's name in tracebacks, as for resume functions
    bytecode.qualname = original.co_qualname
    bytecode.filename = original.co_filename
    bytecode.first_lineno = original.co_firstlineno
    return assemble(bytecode)


def _epilogue(resume: tuple[Any, int, tuple[str, ...]], instr: Instr, closure: bool = False) -> list[Any]:
    fn, depth, names = resume
    where = instr.location
    helper = call_resume_in if closure else call_resume
    code: list[Any] = [
        Instr("BUILD_TUPLE", depth, location=where),
        Instr("STORE_FAST", "__kiln_stack", location=where),
        *current().with_null([Instr("LOAD_CONST", cast(Any, helper), location=where)],
                             [Instr("PUSH_NULL", location=where)]),
        Instr("LOAD_CONST", cast(Any, fn), location=where),
        Instr("LOAD_FAST", "__kiln_stack", location=where),
    ]
    code += [Instr("LOAD_FAST", name, location=where) for name in names]
    code.append(Instr("BUILD_TUPLE", len(names), location=where))
    nargs = 3
    if closure:
        code.append(Instr("LOAD_FAST", CLOSURE_ARG, location=where))
        nargs = 4
    if current().precall:
        code.append(Instr("PRECALL", nargs, location=where))
    code += [Instr("CALL", nargs, location=where), Instr("RETURN_VALUE", location=where)]
    return code


def stack_effect(instr: Instr, jump: bool) -> int:
    """Net stack effect of executing `instr` (CALL counted together with its PRECALL)."""
    if instr.name == "CALL":
        return -int(cast(Any, instr.arg)) - 1
    if instr.name == "CALL_KW":
        return -int(cast(Any, instr.arg)) - 2
    return int(instr.stack_effect(jump=jump))


def popped_count(instr: Instr, jump: bool) -> int:
    """How many stack items `instr` consumes (CALL: its arguments, callable and NULL/self slot)."""
    if instr.name == "CALL":
        return int(cast(Any, instr.arg)) + 2
    if instr.name == "CALL_KW":
        return int(cast(Any, instr.arg)) + 3
    if instr.name == "CALL_FUNCTION_EX":
        return 3 + (int(cast(Any, instr.arg)) & 1)
    return -int(instr.pre_and_post_stack_effect(jump=jump)[0])
