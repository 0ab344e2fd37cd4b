"""Plain subclasses of `dict` and `OrderedDict` made in the region (`class Config(OrderedDict): pass`,
`MyDict(a=x)`, `MyDict.fromkeys(...)`): traced as the dict they are, with the class's own methods bound.

A subclass that changes how the dict behaves (its own `__init__`, `__getitem__`, `__setitem__`,
`__missing__`, `keys`, ...) is not plain: constructing it stays a graph break.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

from capture.variables import upcalls
from capture.variables.base import Unsupported, VariableTracker
from capture.variables.collections_types import OrderedDictVariable, _dict_entries, _render_entries
from capture.variables.containers import DictVariable
from capture.variables.user_objects import bind_class_attribute

if TYPE_CHECKING:
    from capture.symbolic.reconstruct import Reconstructor
    from capture.variables.tracer import Tracer

    _Tracker = VariableTracker  # the mixin is only ever a base of dict trackers
else:
    _Tracker = object

# Methods whose override would change what the dict does with its entries.
_BEHAVIOUR = frozenset({
    "__new__", "__init__", "__getitem__", "__setitem__", "__delitem__", "__missing__", "__contains__", "__iter__",
    "__len__", "__eq__", "__ne__", "__or__", "__ior__", "__getattribute__", "__getattr__", "__setattr__",
    "__delattr__", "__init_subclass__", "__class_getitem__", "__slots__", "keys", "items", "values", "get",
    "update", "pop", "popitem", "setdefault", "copy", "clear", "fromkeys", "move_to_end",
})
_BASES = (dict, collections.OrderedDict)


def plain_dict_subclass(cls: Any) -> bool:
    """True for a user subclass of dict or OrderedDict that only adds methods and class attributes."""
    if not isinstance(cls, type) or type(cls) is not type or cls in _BASES or not issubclass(cls, dict):
        return False
    for klass in cls.__mro__:
        if klass in _BASES or klass is object:
            continue
        if klass.__module__ in ("builtins", "collections") or _BEHAVIOUR.intersection(vars(klass)):
            return False  # defaultdict, Counter, or a class that overrides how entries behave
    return True


@upcalls.construct_dict_subclass.provide
def construct_plain_dict_subclass(tx: Tracer, cls: Any, args: list[VariableTracker],
                                  kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """`cls(*args, **kwargs)` when `cls` is a plain dict subclass (`make_dict_subclass`), else None."""
    return make_dict_subclass(tx, cls, args, kwargs) if plain_dict_subclass(cls) else None


def make_dict_subclass(tx: Tracer, cls: type, args: list[VariableTracker],
                       kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`cls(*args, **kwargs)` for a plain dict subclass: the entries `dict(*args, **kwargs)` would have."""
    if len(args) > 1:
        raise Unsupported(f"{cls.__name__} expected at most 1 argument, got {len(args)}", user_error=True)
    return subclass_instance(cls, _dict_entries(tx, args, kwargs))


def subclass_instance(cls: type, entries: dict[Any, VariableTracker]) -> VariableTracker:
    """The tracker of a new `cls` (a plain dict subclass) holding `entries`."""
    if issubclass(cls, collections.OrderedDict):
        return OrderedDictSubclassVariable(cls, entries)
    return DictSubclassVariable(cls, entries)


class _SubclassBehaviour(_Tracker):
    """What a plain subclass adds to its dict tracker: its class, its own methods, its Python form."""

    cls: type
    items: dict[Any, VariableTracker]
    source: Any

    def python_type(self) -> type:
        return self.cls

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        for klass in self.cls.__mro__:
            if klass in _BASES:
                break
            if name in vars(klass):
                return bind_class_attribute(tx, self, self.cls, vars(klass)[name], name)
        if name == "__class__":
            return tx.output.wrap_value(self.cls, None)
        return super().getattr(tx, name)

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """`cls([(key, value), ...])` built once per run (its `__init__` is dict's own)."""
        if self.source is not None:
            return str(self.source.expr())
        entries = _render_entries(rebuild, self.items)
        return str(rebuild._once(self, f"{rebuild.constant(self.cls)}({entries})"))


class DictSubclassVariable(_SubclassBehaviour, DictVariable):
    """A plain `dict` subclass made in the region."""

    def __init__(self, cls: type, items: dict[Any, VariableTracker]) -> None:
        DictVariable.__init__(self, items)
        self.cls = cls


class OrderedDictSubclassVariable(_SubclassBehaviour, OrderedDictVariable):
    """A plain `OrderedDict` subclass made in the region."""

    def __init__(self, cls: type, items: dict[Any, VariableTracker]) -> None:
        OrderedDictVariable.__init__(self, items)
        self.cls = cls
