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

The same read serves automatic dynamic for numbers: an int or float *argument* of a compiled function (``x * lr``,
``x + step``) is a constant guarded by value until that guard fails once; from then on it is a number path of the
code (`CodeState.number_arguments`), read as an input like the data above, so new values compile nothing new. Unlike
data, a number path keeps its specialization where the trace needs its value (`values_needed`: a Python branch on it,
``range(n)``, a size or dim made from it): the compile starts again with it a constant (`Respecialize`), and it stays
one (`CodeState.specialized_numbers`). A number path's value passed on over a graph break is one of the resume
function's number paths (`RunTimePaths.numbers`).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode, free_unbacked_symbols

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
    cell_expression,
)
from capture.variables.ndarray import NdarrayVariable
from capture.variables.sym_values import SYMBOLIC_NODE, SymNodeVariable

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph

_MAX_DEPTH = 3  # how deep into lists, tuples and dicts made in the region the paths are looked for


@dataclass(frozen=True)
class RunTimePaths:
    """Paths of a frame's arguments that hold run-time data (`CodeState.data_arguments`), those of them known
    to vary already (an int the region read as an input: `CodeState.varying_data`), and those that hold numbers
    computed from varying number arguments only (`CodeState.number_arguments`)."""

    data: frozenset[str] = frozenset()
    varying: frozenset[str] = frozenset()
    numbers: frozenset[str] = frozenset()


class Respecialize(Exception):
    """The trace needed the value of number arguments read as inputs (`paths`): compile again with them constants."""

    def __init__(self, paths: frozenset[str]) -> None:
        super().__init__(", ".join(sorted(paths)))
        self.paths = paths


class _Collector:
    def __init__(self, output: OutputGraph) -> None:
        self.output = output
        self.data: set[str] = set()
        self.varying: set[str] = set()
        self.numbers: set[str] = set()

    def result(self) -> RunTimePaths:
        return RunTimePaths(frozenset(self.data), frozenset(self.varying), frozenset(self.numbers))

    def value(self, value: VariableTracker | None, expr: str, depth: int = 0) -> None:
        """The paths under `expr` of `value`: itself, or items of lists, tuples and dicts."""
        if isinstance(value, SymNodeVariable) and _from_number_arguments(self.output, value.value):
            self.numbers.add(expr)
            return
        if is_run_time_data(value):
            self.data.add(expr)
            if isinstance(value, SymNodeVariable) and value.source is not None:
                self.varying.add(expr)  # read as an input here already: it varies
            return
        if depth >= _MAX_DEPTH or not isinstance(value, (ListVariable, TupleVariable, DictVariable)):
            return
        source = value.source
        if source is not None:  # an existing container passed on: its paths here hold the same data there
            self.carried(source.expr(), expr)
        if isinstance(value, DictVariable) and value.is_unread:  # what the region assigned (never read it whole)
            for key, item in value.assigned.items():
                self.value(item, f"{expr}[{key!r}]", depth + 1)
        elif isinstance(value, DictVariable):
            for key, item in value.items.items():
                self.value(item, f"{expr}[{key!r}]", depth + 1)
        elif not getattr(value, "is_unread", False):  # (a dict view, a ListVariable, has no unread state)
            for index, item in enumerate(value.items):
                self.value(item, f"{expr}[{index!r}]", depth + 1)

    def carried(self, old: str, new: str) -> None:
        """This frame's run-time paths under `old`, as paths under `new`."""
        for path in self.output.run_time_sources:
            if path.startswith(old) and path[len(old):][:1] in ("[", "."):
                if path in self.output.number_sources:
                    self.numbers.add(new + path[len(old):])
                    continue
                self.data.add(new + path[len(old):])
                if path in self.output.varying_sources:
                    self.varying.add(new + path[len(old):])


def run_time_paths(output: OutputGraph, arguments: list[VariableTracker | None], cell_arguments: set[int],
                   first_pushed: int) -> RunTimePaths:
    """Paths (over the resume function's `L`) of the values in `arguments` that hold run-time data.

    `arguments`: the trackers passed, in the resume function's argument order (None: unknown); those at
    `cell_arguments` are closure cells (their contents count); from `first_pushed` on, what the breaking
    instruction pushes: run at run time, so run-time data whatever it is.
    """
    collect = _Collector(output)
    for index, value in enumerate(arguments):
        expr = f"L[{index}]"
        if index >= first_pushed:
            collect.data.add(expr)
        elif index in cell_arguments and isinstance(value, RealCellVariable) and value.pending is None:
            if value.source is not None:  # passed on unassigned: what its contents held here, they hold there
                collect.carried(cell_expression(value.source), expr)
        elif index in cell_arguments:
            collect.value(_cell_contents(value), f"{expr}.cell_contents")
        else:
            collect.value(value, expr)
    return collect.result()


def callee_run_time_paths(output: OutputGraph, instr_name: str, arg_count: int, stack: list[VariableTracker],
                          kw_names: tuple[str, ...]) -> tuple[types.CodeType, RunTimePaths] | None:
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
    collect = _Collector(output)
    for index, value in enumerate(positional[:code.co_argcount]):
        collect.value(value, f"L[{index}]")
    for name, value in keywords.items():
        if name in parameters[code.co_posonlyargcount:]:
            collect.value(value, f"L[{parameters.index(name)}]")
    return (code, collect.result()) if collect.data or collect.numbers else None


def _cell_contents(cell: VariableTracker | None) -> VariableTracker | None:
    if isinstance(cell, CellVariable):
        return cell.contents
    if isinstance(cell, RealCellVariable):
        return cell.pending
    return None


def is_run_time_data(value: VariableTracker | None) -> bool:
    """A float, string, int or numpy scalar known only at run time (a number computed from sizes is rebuilt from
    the sizes)."""
    if isinstance(value, SymNodeVariable):
        return isinstance(value.value, torch.SymFloat) or value.source is not None or \
            bool(free_unbacked_symbols(value.value))
    return isinstance(value, RunTimeValueVariable) or (isinstance(value, NdarrayVariable) and value.scalar)


def _from_number_arguments(output: OutputGraph, value: Any) -> bool:
    """True for a symbolic number whose unbacked symbols all come from number arguments read as inputs."""
    symbols = free_unbacked_symbols(value)
    return bool(symbols) and symbols <= output.number_symbols.keys()


def values_needed(output: OutputGraph, error: BaseException | None) -> frozenset[str]:
    """The number paths whose values the trace needed: named by a data-dependent guard in `error`'s causes (a
    Python branch, ``range(n)``, an int a dim must be), or sizing a tensor of the graph (shapes stay static)."""
    symbols = output.number_symbols
    if not symbols:
        return frozenset()
    needed: set[Any] = set()
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, GuardOnDataDependentSymNode):
            cond = getattr(error, "cond", None)
            free = getattr(cond, "free_symbols", None)
            needed.update(symbols) if free is None else needed.update(free)
        error = error.__cause__ or error.__context__
    for node in output.graph.nodes:
        example = node.meta.get("example_value")
        if isinstance(example, torch.Tensor) and free_unbacked_symbols(example.shape):
            # (the size may be a symbol of its own, `x[:n]`: the numbers the op was given decided it)
            needed.update(free_unbacked_symbols(example.shape))
            for arg in node.all_input_nodes:
                argument = arg.meta.get("example_value")
                if isinstance(argument, (torch.SymInt, torch.SymFloat)):
                    needed.update(free_unbacked_symbols(argument))
    return frozenset(symbols[symbol] for symbol in needed if symbol in symbols)


def run_time_argument(output: OutputGraph, value: Any, source: Source, varying: bool) -> VariableTracker | None:
    """The tracker of a value at a run-time data path (see the module's docstring); None for other values
    (wrapped and guarded as usual)."""
    numbers = output.config.capture_scalar_outputs and not output.export
    if (type(value) is float or (type(value) is int and varying and -2**63 <= value < 2**63)) and numbers:
        read = scalar_input(output, value, source)
        if source.expr() in output.number_sources and isinstance(read, SymNodeVariable):
            output.number_symbols.update(dict.fromkeys(free_unbacked_symbols(read.value), source.expr()))
        return read
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
