"""Python builtins (len, isinstance, range, zip, ...) and methods of lists, tuples and dicts."""

from __future__ import annotations

import builtins
import functools
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from capture.libraries import is_stdlib_or_skipped
from capture.sources import AttrSource
from capture.variables import upcalls
from capture.variables.base import (
    ConstantVariable,
    ExceptionVariable,
    Unsupported,
    VariableTracker,
    wrapped_class,
)
from capture.variables.collections_types import existing_collection, make_set
from capture.variables.common import OPERATOR_FUNCTIONS, Args, Kwargs, _fold, _items, _sorted
from capture.variables.containers import (
    DictVariable,
    IteratorVariable,
    ListVariable,
    TupleVariable,
    iterator_over,
)
from capture.variables.functional import SuperVariable
from capture.variables.functions import CellVariable, RealCellVariable, UserFunctionVariable
from capture.variables.mixed_builtins import min_max_with_tensors
from capture.variables.model_output import ModelOutputVariable
from capture.variables.objects import (
    NNModuleVariable,
    PythonObjectVariable,
    SkippedFunctionVariable,
    TorchFunctionVariable,
)
from capture.variables.sym_values import SymNodeVariable, call_builtin
from capture.variables.tensor import TensorVariable
from capture.variables.user_objects import NewObjectVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

BuiltinHandler = Callable[["Tracer", Args, Kwargs], VariableTracker]
BUILTIN_HANDLERS: dict[Any, BuiltinHandler] = {}

# Builtins that always end the graph: their effect is outside the tensor world.
FRAME_BUILTINS = {builtins.locals, builtins.globals, builtins.vars, builtins.dir, builtins.eval, builtins.exec,
                  builtins.breakpoint}
BREAKING_BUILTINS = {
    builtins.print: "print() writes to the console",
    builtins.input: "input() reads from the console",
    builtins.open: "open() touches the file system",
    builtins.id: "id() of a traced value",
}


def builtin(*fns: Any) -> Callable[[BuiltinHandler], BuiltinHandler]:
    """Register a handler for one or more builtins."""

    def register(handler: BuiltinHandler) -> BuiltinHandler:
        for fn in fns:
            BUILTIN_HANDLERS[fn] = handler
        return handler

    return register


class BuiltinVariable(VariableTracker):
    """A builtin function such as `len` or `isinstance`, or an `operator.*` function."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if self.fn in BREAKING_BUILTINS:
            raise Unsupported(BREAKING_BUILTINS[self.fn])
        if self.fn in FRAME_BUILTINS and not args:
            raise Unsupported(f"{self.fn.__name__}() inspects the calling frame", resumable=False)
        if self.fn is builtins.vars and len(args) == 1:
            if isinstance(args[0], NewObjectVariable):
                return DictVariable(dict(args[0].attrs))
        symbolic = call_builtin(tx, self.fn, args, kwargs)  # None unless an argument is a symbolic size
        if symbolic is not None:
            return symbolic
        handler = BUILTIN_HANDLERS.get(self.fn)
        if handler is not None:
            return handler(tx, args, kwargs)
        if all(a.is_constant() for a in [*args, *kwargs.values()]):
            return _fold(self.fn, args, kwargs)
        if self.fn in OPERATOR_FUNCTIONS and not kwargs:
            return tx.apply_operator(self.fn, args)
        if self.fn is builtins.pow and len(args) == 2 and not kwargs:
            return tx.apply_operator(operator.pow, args)
        raise Unsupported(f"builtin {getattr(self.fn, '__name__', self.fn)}() on traced values")

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        try:
            value = getattr(self.fn, name)
        except AttributeError as error:
            raise Unsupported(str(error), user_error=True) from error
        if value is object.__setattr__:
            return BuiltinVariable(object.__setattr__)
        return tx.output.wrap_value(value, None)

    def __repr__(self) -> str:
        return f"BuiltinVariable({getattr(self.fn, '__name__', self.fn)})"


@builtin(len)
def _len(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    (value,) = args
    collection = existing_collection(tx, value)
    value = collection if collection is not None else value
    if isinstance(value, TensorVariable):
        if value.example.dim() == 0:
            raise Unsupported("len() of a 0-d tensor", user_error=True)
        return tx.output.tensor_metadata(value, "size", 0)  # symbolic when dim 0 is dynamic
    if isinstance(value, (TupleVariable, ListVariable, DictVariable)):
        return ConstantVariable(len(value.items))
    if value.is_constant():
        return ConstantVariable(len(value.as_constant()))
    length = _user_len(tx, value)
    if length is not None:
        return length
    return ConstantVariable(len(value.iterate(tx)))


def _user_len(tx: Tracer, value: VariableTracker) -> VariableTracker | None:
    """`len(obj)` through a user class's `__len__` (None when it has none)."""
    if not isinstance(value, (NewObjectVariable, PythonObjectVariable)):
        return None
    method = getattr(value.python_type(), "__len__", None)
    if not isinstance(method, types.FunctionType) or is_stdlib_or_skipped(method):
        return None
    result = UserFunctionVariable(method).call(tx, [value], {})
    if isinstance(result, SymNodeVariable) and result.python_type() is int:
        return result  # the length of a tensor with a dynamic first dim
    if not result.is_constant() or not isinstance(result.as_constant(), int) or result.as_constant() < 0:
        raise Unsupported(f"__len__ of {value} returned {result}")
    return result


@builtin(callable)
def _callable(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    (value,) = args
    if isinstance(value, PythonObjectVariable):
        return ConstantVariable(callable(value.value))
    if isinstance(value, NewObjectVariable):
        return ConstantVariable(any("__call__" in klass.__dict__ for klass in value.cls.__mro__))
    if isinstance(value, (NNModuleVariable, SkippedFunctionVariable, TorchFunctionVariable, BuiltinVariable)):
        return ConstantVariable(True)
    function_types = (types.FunctionType, types.MethodType, types.BuiltinFunctionType, functools.partial)
    python_type = value.python_type()
    if issubclass(python_type, function_types):
        return ConstantVariable(True)
    if python_type in (int, float, bool, str, tuple, list, dict, type(None), torch.Tensor) or \
            issubclass(python_type, torch.Tensor):
        return ConstantVariable(False)
    raise Unsupported(f"callable() of {value}")


@builtin(isinstance)
def _isinstance(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    value, classes = args
    cls = classes.as_constant() if classes.is_constant() else _class_of(classes)
    return ConstantVariable(issubclass(value.python_type(), cls))


def _class_of(value: VariableTracker) -> Any:
    if isinstance(value, (PythonObjectVariable, TorchFunctionVariable)) and isinstance(
            getattr(value, "value", getattr(value, "fn", None)), type):
        return getattr(value, "value", getattr(value, "fn", None))
    if isinstance(value, TupleVariable):
        return tuple(_class_of(item) for item in value.items)
    if isinstance(value, BuiltinVariable) and isinstance(value.fn, type):
        return value.fn
    raise Unsupported(f"isinstance() with class {value}")


@builtin(type)
def _type(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    if len(args) != 1:
        raise Unsupported("type() with three arguments")
    if args[0].source is not None and not isinstance(args[0], TensorVariable):
        return tx.output.wrap_value(args[0].python_type(), AttrSource(args[0].source, "__class__"))
    return tx.output.wrap_value(args[0].python_type(), None)


@builtin(getattr)
def _getattr(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    obj, name = args[0], args[1].as_constant()
    try:
        return obj.getattr(tx, name)
    except Unsupported as error:
        if len(args) == 3 and _attribute_missing(obj, name, error):
            return args[2]
        raise


@builtin(hasattr)
def _hasattr(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    obj, name = args[0], args[1].as_constant()
    try:
        obj.getattr(tx, name)
    except Unsupported as error:
        if _attribute_missing(obj, name, error):
            return ConstantVariable(False)
        raise
    return ConstantVariable(True)


def _attribute_missing(obj: VariableTracker, name: str, error: Unsupported) -> bool:
    """True when `obj.name` is known to raise AttributeError in eager, not merely untraceable here.

    A tracker that cannot read an attribute the object has must break the graph, never answer
    `getattr`'s default (a tensor's Python attribute once read as missing gave silently wrong results).
    """
    if error.user_error:
        return isinstance(error.exception or error.__cause__, AttributeError)
    if isinstance(obj, ModelOutputVariable):
        return True  # a model output's attributes are its fields, all tracked
    try:
        cls = obj.python_type()
    except Unsupported:
        return False
    # Not on the class, and instances without an instance dict (list, dict, tuple, namedtuples): missing.
    return not hasattr(cls, name) and getattr(cls, "__dictoffset__", 1) == 0


@builtin(range)
def _range(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    return ConstantVariable(range(*[a.as_constant() for a in args]))


@builtin(enumerate)
def _enumerate(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    start = args[1].as_constant() if len(args) > 1 else kwargs["start"].as_constant() if "start" in kwargs else 0
    return IteratorVariable([TupleVariable([ConstantVariable(i + start), item])
                             for i, item in enumerate(_items(tx, args[0]))])


@builtin(zip)
def _zip(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    columns = [_items(tx, a) for a in args]
    return IteratorVariable([TupleVariable(list(row)) for row in zip(*columns)])


@builtin(reversed)
def _reversed(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    return IteratorVariable(list(reversed(_items(tx, args[0]))))


@builtin(iter)
def _iter(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    if len(args) != 1 or kwargs:
        raise Unsupported("iter() with a sentinel")
    return iterator_over(tx, args[0])


@builtin(next)
def _next(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    iterator = args[0]
    if not isinstance(iterator, IteratorVariable):
        raise Unsupported("next() on an unknown iterator")
    item = iterator.next_item()
    if item is None:
        if len(args) > 1:
            return args[1]
        raise Unsupported("StopIteration", user_error=True)
    return item


@builtin(tuple)
def _tuple(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    return TupleVariable(_items(tx, args[0]) if args else [])


@builtin(list)
def _list(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    return ListVariable(_items(tx, args[0]) if args else [])


@builtin(dict)
def _dict(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    items: dict[Any, VariableTracker] = {}
    if args:
        source = args[0]
        if isinstance(source, DictVariable):
            items.update(source.items)
        else:
            for pair in _items(tx, source):
                key, value = pair.iterate(tx)
                items[key.as_constant()] = value
    items.update(kwargs)
    return DictVariable(items)


def _set_builtin(cls: type) -> BuiltinHandler:
    def handler(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"{cls.__name__}() takes no keyword arguments", user_error=True)
        return make_set(tx, cls, args)

    return handler


BUILTIN_HANDLERS[set] = _set_builtin(set)
BUILTIN_HANDLERS[frozenset] = _set_builtin(frozenset)


@builtin(bool)
def _bool(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    return ConstantVariable(args[0].truth(tx)) if args else ConstantVariable(False)


def _numeric_builtin(fn: Any) -> BuiltinHandler:
    def handler(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if all(a.is_constant() for a in [*args, *kwargs.values()]):
            return _fold(fn, args, kwargs)
        if fn is abs and len(args) == 1 and isinstance(args[0], TensorVariable):
            return tx.output.call_graph("call_function", operator.abs, args, {})
        if fn is abs and len(args) == 1:
            array = upcalls.ndarray_abs(tx, args)  # variables/ndarray.py
            if array is not None:
                return array
        if fn in (str, repr) and len(args) == 1:
            target = args[0]
            value = getattr(target, "value", getattr(target, "fn", None))
            if isinstance(target, (PythonObjectVariable, TorchFunctionVariable)) and isinstance(value, type):
                return ConstantVariable(fn(value))
            if isinstance(target, ExceptionVariable):
                return ConstantVariable(fn(target.value))
        if fn in (int, float) and len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
            number = _tensor_number(tx, fn, args[0])
            if number is not None:
                return number
        if any(isinstance(a, TensorVariable) for a in args):
            raise Unsupported(f"{fn.__name__}() of a tensor converts run-time data to a Python value")
        raise Unsupported(f"{fn.__name__}() of {', '.join(repr(a) for a in args)}")

    return handler


def _tensor_number(tx: Tracer, fn: Any, tensor: TensorVariable) -> VariableTracker | None:
    """``float(t)`` / ``int(t)`` of a one-element real tensor under `capture_scalar_outputs`: ``t.item()`` in the
    graph (an unbacked symbolic number, as ``.item()`` gives), converted as Python converts it; None (a graph break,
    where eager converts or raises) for other tensors."""
    example = tensor.example
    if not tx.output.config.capture_scalar_outputs or example.dtype.is_complex or example.dtype == torch.bool:
        return None
    numel = example.numel()
    if type(numel) is not int or numel != 1:
        return None
    value = tx.output.call_graph("call_method", "item", [tensor], {})
    if isinstance(value, SymNodeVariable) and value.python_type() is not fn:
        return call_builtin(tx, fn, [value], {})
    return value


for _fn in (int, float, str, abs, round, complex):
    BUILTIN_HANDLERS[_fn] = _numeric_builtin(_fn)


def _reduce_builtin(fn: Any) -> BuiltinHandler:
    def handler(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if fn is sorted:
            return _sorted(tx, args, kwargs)
        if all(a.is_constant() for a in [*args, *kwargs.values()]):
            return _fold(fn, args, kwargs)
        if fn in (min, max) and set(kwargs) <= {"key"} and len(args) == 1 and "key" in kwargs:
            ordered = _sorted(tx, args, {"key": kwargs["key"]}).items  # type: ignore[attr-defined]
            if not ordered:
                raise Unsupported(f"{fn.__name__}() arg is an empty sequence", user_error=True)
            return ordered[0] if fn is min else _last_max(tx, args, kwargs["key"])
        if fn is sum and set(kwargs) <= {"start"} and len(args) + len(kwargs) <= 2 and args:
            items = _items(tx, args[0])
            total: VariableTracker = args[1] if len(args) > 1 else kwargs.get("start", ConstantVariable(0))
            for item in items:
                total = tx.apply_operator(operator.add, [total, item])
            return total
        if kwargs:
            raise Unsupported(f"{fn.__name__}() with keyword arguments over traced values")
        values = _items(tx, args[0]) if len(args) == 1 else list(args)
        if all(v.is_constant() for v in values):
            return ConstantVariable(fn(v.as_constant() for v in values))
        if fn in (min, max):
            mixed = min_max_with_tensors(tx, fn, values)  # `min(t, 3)` on a one-element tensor
            if mixed is not None:
                return mixed
        sized = _over_sizes(tx, fn, values)
        if sized is not None:
            return sized
        what = "tensors" if any(isinstance(v, TensorVariable) for v in values) else "traced values"
        raise Unsupported(f"{fn.__name__}() over {what} depends on run-time data")

    return handler


for _reducer in (sum, min, max, any, all, sorted):
    BUILTIN_HANDLERS[_reducer] = _reduce_builtin(_reducer)


def _over_sizes(tx: Tracer, fn: Any, values: list[VariableTracker]) -> VariableTracker | None:
    """`all(x.shape)`, `min(input_resolution)` over constants and symbolic sizes (None for anything else).

    `all`/`any` branch on each item as Python does (a guard per item looked at); `min`/`max` are traced
    (`torch.sym_min`), so a comparison of the result guards like any comparison of sizes."""
    if not all(v.is_constant() or isinstance(v, SymNodeVariable) for v in values):
        return None
    if fn in (all, any):
        for value in values:
            if value.truth(tx) is (fn is any):
                return ConstantVariable(fn is any)
        return ConstantVariable(fn is all)
    if fn in (min, max) and values:
        result = values[0]
        for value in values[1:]:
            result = call_builtin(tx, fn, [result, value], {}) or _fold(fn, [result, value], {})
        return result
    return None


def _last_max(tx: Tracer, args: Args, key: VariableTracker) -> VariableTracker:
    """max(items, key=...): the first item with the largest key, as Python returns it."""
    items = _items(tx, args[0])
    keys = [key.call(tx, [item], {}).as_constant() for item in items]
    best = 0
    for index in range(1, len(items)):
        if keys[index] > keys[best]:
            best = index
    return items[best]


@builtin(super)
def _super(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    if args:
        cls = (args[0].as_constant() if args[0].is_constant() else wrapped_class(args[0])) if len(args) == 2 else None
        if not isinstance(cls, type):
            raise Unsupported("super() with unusual arguments", resumable=False)
        return SuperVariable(cls, args[1])
    cell = tx.cells.get("__class__")
    if cell is None or not tx.code.co_argcount:
        raise Unsupported("super() outside a method", resumable=False)
    if isinstance(cell, RealCellVariable):
        cls = cell.cell.cell_contents
    elif isinstance(cell, CellVariable) and cell.contents is not None and hasattr(cell.contents, "value"):
        cls = cell.contents.value
    else:
        raise Unsupported("super(): __class__ cell not found", resumable=False)
    receiver = tx.locals.get(tx.code.co_varnames[0])
    if receiver is None:
        raise Unsupported("super(): no receiver", resumable=False)
    return SuperVariable(cls, receiver)


@builtin(object.__setattr__)
def _object_setattr(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    target, name, value = args
    if not isinstance(target, NewObjectVariable):
        raise Unsupported("object.__setattr__ on an existing object")
    target.attrs[name.as_constant()] = value
    return ConstantVariable(None)


@builtin(setattr)
def _setattr(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    target, name, value = args
    if isinstance(target, NewObjectVariable):
        target.setattr(tx, name.as_constant(), value)
        return ConstantVariable(None)
    raise Unsupported("builtin setattr() on an existing object")
