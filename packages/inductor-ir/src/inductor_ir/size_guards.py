"""Checks that inputs fit the symbolic sizes a graph was compiled for.

A graph compiled over symbolic sizes reads each symbol from one place (``x.size(1)``); every other
size or stride of the inputs that the kernels assume is an expression of those symbols (``w.size(0)
== s1``, ``x.stride(0) == 16*s1``). :func:`input_size_checker` builds, once per compiled graph, a small
Python function that evaluates them on each call, so a call with mismatched sizes raises instead of
reading out of bounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy

from inductor_ir.ir import InputBuffer, Program
from inductor_ir.unbacked import is_unbacked_float

__all__ = ["input_size_checker"]

SizeChecker = Callable[[Sequence[Any]], "str | None"]


def _python(expr: sympy.Expr) -> str:
    return f"({sympy.sympify(expr)})"


def input_size_checker(program: Program) -> SizeChecker | None:
    """A function of the inputs returning a description of the first mismatch (None: all fit).

    None when the program has no size symbols (static graphs are checked by dtype and size only).
    """
    if not program.size_sources:
        return None
    lines = ["def check(args):"]
    for symbol, source in program.size_sources.items():
        if source.buffer:
            continue  # unbacked: no input gives it
        if source.kind == "scalar":
            if is_unbacked_float(symbol):
                continue  # an `item()` float (inf and nan included) never sizes a buffer: nothing to read
            lines.append(f"    {symbol} = int(args[{source.position}])")
        else:
            lines.append(f"    {symbol} = {source.solved(f'args[{source.position}].{source.kind}({source.dim})')}")
    checks = 0
    for position, item in enumerate(program.graph_inputs):
        if not isinstance(item, InputBuffer):
            continue
        layout = item.layout
        for dim, (size, stride) in enumerate(zip(layout.size, layout.stride)):
            size, stride = sympy.sympify(size), sympy.sympify(stride)
            if size.free_symbols and not _is_source(program, size, position, "size", dim):
                lines.append(f"    if args[{position}].size({dim}) != {_python(size)}:")
                lines.append(f"        return 'input {position} ({item.name}) dim {dim} must be {size}'")
                checks += 1
            if stride.free_symbols and not _is_source(program, stride, position, "stride", dim):
                # A dim of size 1 is never stepped over, nor any dim of an empty tensor: their
                # strides are whatever the producer chose.
                lines.append(
                    f"    if args[{position}].size({dim}) != 1 and args[{position}].numel() != 0"
                    f" and args[{position}].stride({dim}) != {_python(stride)}:"
                )
                lines.append(f"        return 'input {position} ({item.name}) stride {dim} must be {stride}'")
                checks += 1
    if not checks:
        return None
    lines.append("    return None")
    namespace: dict[str, Any] = {"Mod": lambda a, b: a % b, "Max": max, "Min": min}
    exec(compile("\n".join(lines), "<inductor_ir size checks>", "exec"), namespace)  # our own text, built above
    return namespace["check"]  # type: ignore[no-any-return]


def _is_source(program: Program, expr: sympy.Expr, position: int, kind: str, dim: int) -> bool:
    source = program.size_sources.get(expr) if isinstance(expr, sympy.Symbol) else None
    return source is not None and not source.python and (source.position, source.kind, source.dim) == (position, kind, dim)
