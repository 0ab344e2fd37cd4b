"""Values that cross a graph break holding run-time data: passed to the resume function as inputs, not constants.

A float the graph read from a tensor (``s = float(t.sum())``, ``loss.item()``), a string a break formatted from one
(``f"{loss.item():.4f}"``), or whatever the breaking instruction computed in Python (a disabled function's result,
``time.time()``) is new on every call. Wrapped as a constant in the resume function, it was guarded by its value
and recompiled the resume function on every call (until the cache limit, then ran eagerly).

The break that makes a resume function marks the paths of its arguments that hold such values (`run_time_paths`:
``L[2]``, ``L[1]['loss']``, ``L[0].cell_contents``), kept in the resume code's `CodeState.data_arguments`; a break
at a call whose callee broke marks the callee's arguments so (`callee_run_time_paths`: the callee is captured on
its own, ``log_metric("loss", loss.item())``). The trace reads a value found there (`run_time_argument`) as:

* a float: an unbacked symbolic float, ``.item()`` of a float64 0-d tensor input made from it on each call, as
  ``.item()`` gave it before the break (only its type is guarded; a Python branch on it is a graph break there);
* a numpy scalar (``np.sum(a)``): a 0-d graph input of its dtype, traced with NumPy's semantics;
* a string: a `RunTimeValueVariable`, passed along and rebuilt from its path; any other use is a graph break;
* an int: a constant as before (ints size and index things, and often stay the same), until its value guard
  fails once (`CodeState.varying_data`): then an unbacked symbolic int, as a float is.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from capture.bytecode.dialects import current
from capture.sources import ScalarTensorSource, Source
from capture.variables.base import NullVariable, RunTimeValueVariable, VariableTracker, numpy_scalar
from capture.variables.containers import DictVariable, ListVariable, TupleVariable
from capture.variables.functions import (
    BoundMethodVariable,
    CellVariable,
    NestedFunctionVariable,
    RealCellVariable,
    UserFunctionVariable,
)
from capture.variables.ndarray import NdarrayVariable
from capture.variables.sym_values import SYMBOLIC_NODE, SymNodeVariable

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph

_MAX_DEPTH = 3  # how deep into lists, tuples and dicts made in the region the paths are looked for


def run_time_paths(output: OutputGraph, arguments: list[VariableTracker | None], cell_arguments: set[int],
                   first_pushed: int) -> frozenset[str]:
    """Paths (over the resume function's `L`) of the values in `arguments` that hold run-time data.

    `arguments`: the trackers passed, in the resume function's argument order (None: unknown); those at
    `cell_arguments` are closure cells (their contents count); from `first_pushed` on, what the breaking
    instruction pushes: run at run time, so run-time data whatever it is.
    """
    paths: list[str] = []
    for index, value in enumerate(arguments):
        expr = f"L[{index}]"
        if index >= first_pushed:
            paths.append(expr)
        elif index in cell_arguments and _passed_on(output, value):
            paths.append(f"{expr}.cell_contents")
        elif index in cell_arguments:
            _collect(output, _cell_contents(value), f"{expr}.cell_contents", paths, 0)
        else:
            _collect(output, value, expr, paths, 0)
    return frozenset(paths)


def callee_run_time_paths(output: OutputGraph, instr_name: str, arg_count: int, stack: list[VariableTracker],
                          kw_names: tuple[str, ...]) -> tuple[types.CodeType, frozenset[str]] | None:
    """For a break at the call of a user function (the callee broke, and is captured on its own when the stub
    calls it): its code and the paths of its arguments that hold run-time data (``log_metric("loss",
    loss.item())``), None when there are none or the call is not a plain CALL of a Python function."""
    if instr_name not in ("CALL", "CALL_KW") or not stack:
        return None
    if instr_name == "CALL_KW":  # 3.13: the keyword names sit on top of the arguments
        names = stack[-1]
        kw_names = tuple(names.as_constant()) if names.is_constant() else ()
        stack = stack[:-1]
    base = len(stack) - arg_count - 2
    if base < 0:
        return None
    dialect = current()
    args = stack[base + 2:]
    if isinstance(stack[dialect.null_slot(base)], NullVariable):
        callee = stack[dialect.callable_slot(base)]
    else:  # a method and its receiver (the receiver is the first argument)
        callee, args = stack[base], [stack[base + 1], *args]
    code: types.CodeType | None = None
    if isinstance(callee, BoundMethodVariable) and isinstance(callee.function, UserFunctionVariable):
        code, args = callee.function.fn.__code__, [callee.receiver, *args]
    elif isinstance(callee, UserFunctionVariable):
        code = callee.fn.__code__
    elif isinstance(callee, NestedFunctionVariable):
        code = callee.code
    if code is None:
        return None
    positional = args[:len(args) - len(kw_names)]
    keywords = dict(zip(kw_names, args[len(args) - len(kw_names):]))
    parameters = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    paths: list[str] = []
    for index, value in enumerate(positional[:code.co_argcount]):
        _collect(output, value, f"L[{index}]", paths, 0)
    for name, value in keywords.items():
        if name in parameters[code.co_posonlyargcount:]:
            _collect(output, value, f"L[{parameters.index(name)}]", paths, 0)
    return (code, frozenset(paths)) if paths else None


def _cell_contents(cell: VariableTracker | None) -> VariableTracker | None:
    if isinstance(cell, CellVariable):
        return cell.contents
    if isinstance(cell, RealCellVariable):
        return cell.pending
    return None


def _passed_on(output: OutputGraph, cell: VariableTracker | None) -> bool:
    """A cell this resume function got holding run-time data, not assigned since (whether read or not)."""
    return isinstance(cell, RealCellVariable) and cell.pending is None and cell.source is not None and \
        f"{cell.source.expr()}.cell_contents" in output.run_time_sources


def _collect(output: OutputGraph, value: VariableTracker | None, expr: str, paths: list[str], depth: int) -> None:
    if is_run_time_data(value):
        paths.append(expr)
    elif depth < _MAX_DEPTH and isinstance(value, (ListVariable, TupleVariable)) and not getattr(value, "is_unread", False):
        for index, item in enumerate(value.items):
            _collect(output, item, f"{expr}[{index!r}]", paths, depth + 1)
    elif depth < _MAX_DEPTH and isinstance(value, DictVariable):
        for key, item in value.items.items():
            _collect(output, item, f"{expr}[{key!r}]", paths, depth + 1)


def is_run_time_data(value: VariableTracker | None) -> bool:
    """A float, string, int or numpy scalar known only at run time (a number computed from sizes is rebuilt from
    the sizes)."""
    if isinstance(value, SymNodeVariable):
        return isinstance(value.value, torch.SymFloat) or value.source is not None or \
            bool(free_unbacked_symbols(value.value))
    return isinstance(value, RunTimeValueVariable) or (isinstance(value, NdarrayVariable) and value.scalar)


def run_time_argument(output: OutputGraph, value: Any, source: Source, varying: bool) -> VariableTracker | None:
    """The tracker of a value at a run-time data path (see the module's docstring); None for other values
    (wrapped and guarded as usual)."""
    numbers = output.config.capture_scalar_outputs and not output.export
    if type(value) is float and numbers:
        return scalar_input(output, value, source)
    if type(value) is int and varying and numbers and -2**63 <= value < 2**63:
        return scalar_input(output, value, source)
    if type(value) is str:
        output.guards.type_is(source, value)
        return RunTimeValueVariable(str, source)
    if numbers and numpy_scalar(value):
        return _numpy_scalar_input(output, value, source)
    return None


def _numpy_scalar_input(output: OutputGraph, value: Any, source: Source) -> VariableTracker | None:
    """A numpy scalar (``np.sum(a)`` before the break): a 0-d graph input of its dtype, traced with NumPy's
    semantics as the region traced it (only its type, hence its dtype, is guarded)."""
    try:
        tensor = torch.as_tensor(value)
    except (TypeError, RuntimeError):
        return None
    output.guards.type_is(source, value)
    output.keepalive.append(tensor)
    holder = output.add_input(tensor, ScalarTensorSource(source, output.guards.constant(torch), str(tensor.dtype)))
    return NdarrayVariable(holder, scalar=True, source=source)


def scalar_input(output: OutputGraph, value: float | int, source: Source) -> VariableTracker:
    """A Python float (int) read into the graph as a float64 (int64) 0-d tensor input, exact for any float, and
    ``.item()`` of it: an unbacked symbolic number. Only its type is guarded."""
    output.guards.type_is(source, value)
    dtype = torch.float64 if type(value) is float else torch.int64
    tensor = torch.scalar_tensor(value, dtype=dtype)
    output.keepalive.append(tensor)
    holder = output.add_input(tensor, ScalarTensorSource(source, output.guards.constant(torch), str(dtype)))
    read = output.call_graph("call_method", "item", [holder], {})
    if isinstance(read, SymNodeVariable):
        # Rebuilt after a break as the value itself; the read is dropped when the graph does not use it.
        read.source = source
        read.node.meta[SYMBOLIC_NODE] = True
    return read
