"""Assembling generated code objects safely: exception-table depths and stack sizes CPython trusts.

CPython does not check a code object's exception table or its ``co_stacksize``: a handler depth
above the real stack leaves values on it that the handler's code then takes for others (a with
block's exit called with the wrong arguments), and a stack larger than ``co_stacksize`` writes past
the frame. Either corrupts memory silently. The `bytecode` library computes both by following the
flow from the first instruction; in a resume function, which jumps into the middle of its original
code, a try block entered past its start is never reached that way: its depth was left at the
library's unset marker (32768) and its handler's stack was never counted.

So code derived from an original (a resume function, an eager copy) keeps the original's handler
depths (the prologue rebuilds exactly the original's stack at the resume point), and its stack size
is at least the original's plus what the rewrite adds. Every assembled code object is checked:
a handler depth beyond its stack size raises `BytecodeAssemblyError`, and the caller runs the
frame eagerly rather than a code object that could corrupt memory.
"""

from __future__ import annotations

import dis
import types

from bytecode import Bytecode

__all__ = ["BytecodeAssemblyError", "assemble", "check_exception_depths"]


class BytecodeAssemblyError(ValueError):
    """A generated code object whose exception table or stack size cannot be trusted."""


def check_exception_depths(code: types.CodeType) -> None:
    """Raise `BytecodeAssemblyError` when a handler of `code` expects more stack than it has."""
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None:  # (CPython 3.11 to 3.13 all have it)
        return
    for entry in parse(code):
        if entry.depth + 1 + int(entry.lasti) > code.co_stacksize:
            raise BytecodeAssemblyError(
                f"{code.co_name}: a handler at {entry.target} expects stack depth {entry.depth}, "
                f"beyond the code's stack size {code.co_stacksize}"
            )


def assemble(bytecode: Bytecode, *, at_least: int = 0, keep_handler_depths: bool = False) -> types.CodeType:
    """`bytecode` as a code object with a stack size of at least `at_least`, checked.

    `keep_handler_depths`: the try blocks carry their depths from the original code (read with
    ``Bytecode.from_code(..., conserve_exception_block_stackdepth=True)``) instead of recomputing them.
    """
    code = bytecode.to_code(compute_exception_stack_depths=not keep_handler_depths)
    if code.co_stacksize < at_least:
        code = code.replace(co_stacksize=at_least)
    check_exception_depths(code)
    return code
