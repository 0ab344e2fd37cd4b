"""User Python functions, methods and closures: inlined into the caller's graph."""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any

from capture.sources import AttrSource, ItemSource, Source
from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.containers import DictVariable, TupleVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

CO_VARARGS = inspect.CO_VARARGS
CO_VARKEYWORDS = inspect.CO_VARKEYWORDS


class CellVariable(VariableTracker):
    """A closure cell made in the traced region (its contents are tracked symbolically)."""

    def __init__(self, contents: VariableTracker | None = None) -> None:
        self.contents = contents

    def __repr__(self) -> str:
        return f"CellVariable({self.contents})"


class RealCellVariable(VariableTracker):
    """An existing closure cell: reads are guarded, writes replayed after the graph."""

    def __init__(self, cell: types.CellType, source: Source | None) -> None:
        self.cell = cell
        self.source = source
        self.pending: VariableTracker | None = None
        self.was_read = False  # its contents were read in the region (for `OutputGraph.guard_distinct_objects`)

    def cell_expr(self) -> str | None:
        """The expression of the cell object itself (a closure's `C[i]`, not its contents), if it has a source."""
        return cell_expression(self.source) if self.source is not None else None


def cell_expression(source: Source) -> str:
    """The expression of the cell a cell's source names (`ClosureSource` renders its contents: ``C[0].cell_contents``)."""
    text = source.expr()
    return text[: -len(".cell_contents")] if text.endswith(".cell_contents") else text


class UserFunctionVariable(VariableTracker):
    """A Python function defined by the user: calls are inlined."""

    def __init__(self, fn: types.FunctionType, source: Source | None = None, by_parts: bool = False) -> None:
        self.fn = fn
        self.source = source
        # Guarded through its parts, not its identity (a closure made anew on each call, `builder.made_per_call`):
        # its defaults are read through its source, so they are guarded too.
        self.by_parts = by_parts and source is not None

    def python_type(self) -> type:
        return types.FunctionType

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__code__"):
            return ConstantVariable(getattr(self.fn, name))
        try:
            value = getattr(self.fn, name)
        except AttributeError as error:
            raise Unsupported(str(error), user_error=True) from error
        source = AttrSource(self.source, name) if self.source is not None else None
        return tx.output.wrap_value(value, source)

    def closure_cells(self, tx: Tracer) -> list[VariableTracker]:
        """The function's closure cells as trackers (guarded through the function's source)."""
        cells: list[VariableTracker] = []
        for index, cell in enumerate(self.fn.__closure__ or ()):
            source = None
            if self.source is not None:
                source = ItemSource(AttrSource(self.source, "__closure__"), index)
            cells.append(tx.output.cell_tracker(cell, source))
        return cells

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        decorated = upcalls.decorated_function_call(tx, self.fn, args, kwargs)  # variables/context_managers.py
        if decorated is not None:
            return decorated
        if self.by_parts and self.source is not None:
            defaults = _defaults(tx, self.fn.__defaults__, AttrSource(self.source, "__defaults__"))
            kwdefaults = _kwdefaults(tx, self.fn.__kwdefaults__, AttrSource(self.source, "__kwdefaults__"))
        else:
            defaults = [tx.output.wrap_value(v, None) for v in (self.fn.__defaults__ or ())]
            kwdefaults = {k: tx.output.wrap_value(v, None) for k, v in (self.fn.__kwdefaults__ or {}).items()}
        bound = bind_arguments(self.fn.__code__, self.fn.__qualname__, defaults, kwdefaults, args, kwargs)
        return tx.inline_call(self.fn.__code__, self.fn.__globals__, bound, self.closure_cells(tx),
                              self.fn.__qualname__)

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__qualname__})"


def _defaults(tx: Tracer, value: tuple[Any, ...] | None, source: Source) -> list[VariableTracker]:
    """A function's ``__defaults__`` read (and guarded) through `source`."""
    wrapped = tx.output.wrap_value(value, source)
    return list(wrapped.items) if isinstance(wrapped, TupleVariable) else []


def _kwdefaults(tx: Tracer, value: dict[str, Any] | None, source: Source) -> dict[str, VariableTracker]:
    """A function's ``__kwdefaults__`` read (and guarded) through `source`."""
    wrapped = tx.output.wrap_value(value, source)
    return dict(wrapped.items) if isinstance(wrapped, DictVariable) else {}


def call_in_grad_mode(tx: Tracer, enabled: bool, fn: VariableTracker, args: list[VariableTracker],
                       kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """Inline `fn(*args, **kwargs)` with grad mode `enabled`, restoring the previous mode after (as a with-block)."""
    previous = tx.grad_enabled
    tx.set_grad_enabled(enabled)
    try:
        return fn.call(tx, args, kwargs)
    finally:
        tx.set_grad_enabled(previous)


class NestedFunctionVariable(VariableTracker):
    """A function created in the traced region by MAKE_FUNCTION (a closure or lambda)."""

    def __init__(self, code: types.CodeType, qualname: str, f_globals: dict[str, Any],
                 defaults: list[VariableTracker], kwdefaults: dict[str, VariableTracker],
                 closure: list[VariableTracker]) -> None:
        self.code = code
        self.qualname = qualname
        self.f_globals = f_globals
        self.defaults = defaults
        self.kwdefaults = kwdefaults
        self.closure = closure

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        bound = bind_arguments(self.code, self.qualname, self.defaults, self.kwdefaults, args, kwargs)
        return tx.inline_call(self.code, self.f_globals, bound, self.closure, self.qualname)

    def __repr__(self) -> str:
        return f"NestedFunctionVariable({self.qualname})"


class BoundMethodVariable(VariableTracker):
    """`obj.method` for a user-defined method: calls inline the function with `obj` first."""

    def __init__(self, function: VariableTracker, receiver: VariableTracker, source: Source | None = None) -> None:
        self.function = function
        self.receiver = receiver
        self.source = source

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return self.function.call(tx, [self.receiver, *args], kwargs)

    def __repr__(self) -> str:
        return f"BoundMethodVariable({self.function}, {self.receiver})"


def bind_arguments(code: types.CodeType, qualname: str, defaults: list[VariableTracker],
                   kwdefaults: dict[str, VariableTracker], args: list[VariableTracker],
                   kwargs: dict[str, VariableTracker]) -> dict[str, VariableTracker]:
    """Bind call arguments to the parameter names of `code`, as CPython would."""
    nargs = code.co_argcount
    nkwonly = code.co_kwonlyargcount
    names = code.co_varnames
    positional = list(names[:nargs])
    kwonly = list(names[nargs:nargs + nkwonly])
    index = nargs + nkwonly
    varargs_name = names[index] if code.co_flags & CO_VARARGS else None
    if varargs_name:
        index += 1
    varkw_name = names[index] if code.co_flags & CO_VARKEYWORDS else None
    bound: dict[str, VariableTracker] = {}
    for name, value in zip(positional, args):
        bound[name] = value
    extra = args[len(positional):]
    if extra and not varargs_name:
        raise Unsupported(f"{qualname}() takes {nargs} positional arguments but {len(args)} were given",
                          user_error=True)
    if varargs_name:
        bound[varargs_name] = TupleVariable(list(extra))
    rest: dict[str, VariableTracker] = {}
    posonly = set(positional[:code.co_posonlyargcount])
    for key, value in kwargs.items():
        if key in bound or (key in positional and key not in posonly) or key in kwonly:
            if key in bound:
                raise Unsupported(f"{qualname}() got multiple values for argument '{key}'", user_error=True)
            bound[key] = value
        elif varkw_name:
            rest[key] = value
        else:
            raise Unsupported(f"{qualname}() got an unexpected keyword argument '{key}'", user_error=True)
    first_default = nargs - len(defaults)
    for i, name in enumerate(positional):
        if name not in bound:
            if i >= first_default:
                bound[name] = defaults[i - first_default]
            else:
                raise Unsupported(f"{qualname}() missing required argument '{name}'", user_error=True)
    for name in kwonly:
        if name not in bound:
            if name in kwdefaults:
                bound[name] = kwdefaults[name]
            else:
                raise Unsupported(f"{qualname}() missing keyword-only argument '{name}'", user_error=True)
    if varkw_name:
        bound[varkw_name] = DictVariable(dict(rest))
    return bound
