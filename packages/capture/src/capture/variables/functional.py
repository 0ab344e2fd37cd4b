"""super(), functools.partial/reduce, itertools.chain, map/filter and read-only builtin methods."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from capture.sources import PureCallSource, Source
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker, is_constant_value
from capture.variables.common import Args, Kwargs, _items
from capture.variables.containers import IteratorVariable, ListVariable
from capture.variables.functions import BoundMethodVariable, UserFunctionVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


class SuperVariable(VariableTracker):
    """`super()` inside an inlined method: attribute lookups start after `cls` in the MRO."""

    def __init__(self, cls: type, receiver: VariableTracker) -> None:
        self.cls = cls
        self.receiver = receiver

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        import types

        mro = self.receiver.python_type().__mro__
        start = mro.index(self.cls) + 1 if self.cls in mro else len(mro)
        for klass in mro[start:]:
            if name in klass.__dict__:
                attribute = klass.__dict__[name]
                if klass in (dict, list, tuple) and name in PURE_METHODS and self.receiver.source is not None:
                    return PureMethodVariable(self.receiver, klass, name)
                if isinstance(attribute, types.FunctionType):
                    return BoundMethodVariable(UserFunctionVariable(attribute), self.receiver)
                if isinstance(attribute, (classmethod, staticmethod)):
                    break
                return tx.output.wrap_value(attribute, None)
        raise Unsupported(f"super().{name}", resumable=False)


class FunctionalVariable(VariableTracker):
    """functools.partial / functools.reduce / itertools.chain / map / filter."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        import functools
        import itertools

        if self.fn is functools.partial:
            return PartialVariable(args[0], list(args[1:]), dict(kwargs))
        if self.fn is functools.reduce:
            items = _items(tx, args[1])
            if len(args) > 2:
                total = args[2]
            elif items:
                total, items = items[0], items[1:]
            else:
                raise Unsupported("reduce() of empty iterable with no initial value", user_error=True)
            for item in items:
                total = args[0].call(tx, [total, item], {})
            return total
        import typing

        if self.fn is typing.cast:
            return args[1]
        if self.fn is itertools.chain:
            return IteratorVariable([item for a in args for item in _items(tx, a)])
        if self.fn is map:
            columns = [_items(tx, a) for a in args[1:]]
            return IteratorVariable([args[0].call(tx, list(row), {}) for row in zip(*columns)])
        if self.fn is filter:
            kept = []
            for item in _items(tx, args[1]):
                test = item if args[0].is_constant() and args[0].as_constant() is None else args[0].call(tx, [item], {})
                if test.truth(tx):
                    kept.append(item)
            return IteratorVariable(kept)
        raise Unsupported(f"{self.fn}")


class PartialVariable(VariableTracker):
    """functools.partial(fn, *args, **kwargs) made in the traced region."""

    def __init__(self, fn: VariableTracker, args: Args, kwargs: Kwargs, source: Source | None = None) -> None:
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.source = source  # an existing partial object (reconstructed as itself)

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        return self.fn.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})


PURE_METHODS = {"get", "__getitem__", "__contains__", "__len__", "keys", "values", "items", "index", "count"}


class PureMethodVariable(VariableTracker):
    """A read-only method of a builtin container, run at trace time; its result is guarded by re-running it."""

    def __init__(self, receiver: VariableTracker, owner: type, name: str) -> None:
        self.receiver = receiver
        self.owner = owner
        self.name = name

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if kwargs or not all(a.is_constant() for a in args) or self.receiver.source is None:
            raise Unsupported(f"{self.owner.__name__}.{self.name} with non-constant arguments")
        values = tuple(a.as_constant() for a in args)
        real = getattr(self.receiver, "value", None)
        try:
            result = getattr(self.owner, self.name)(real, *values)
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        if self.name in ("keys", "values", "items"):
            result = list(result)
            source = None
        else:
            owner_name = tx.output.guards.constant(self.owner)
            source = PureCallSource(self.receiver.source, owner_name, self.name, values)
        if source is None:
            if not all(is_constant_value(v) for v in result):
                raise Unsupported(f"{self.owner.__name__}.{self.name}() of non-constant values")
            tx.output.guards.add("PURE_CALL", self.receiver.source,
                                 f"list({self.receiver.source.expr()}.{self.name}()) == {result!r}",
                                 f"{self.receiver.source.expr()}.{self.name}() is {result!r}")
            return ListVariable([ConstantVariable(v) for v in result])
        return tx.output.wrap_value(result, source)
