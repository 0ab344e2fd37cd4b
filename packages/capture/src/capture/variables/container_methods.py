"""Methods of traced lists, tuples and dicts (append, pop, items, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.collections_types import DictViewVariable, _dict_entries
from capture.variables.common import Args, Kwargs, _items, _sorted
from capture.variables.containers import DictVariable, ListVariable, TupleVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


class ContainerMethodVariable(VariableTracker):
    """A method of a traced list, tuple or dict, e.g. `results.append`."""

    def __init__(self, container: VariableTracker, name: str) -> None:
        self.container = container
        self.name = name

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        container, name = self.container, self.name
        if isinstance(container, ListVariable):
            return _list_method(tx, container, name, args, kwargs)
        if isinstance(container, DictVariable):
            return _dict_method(tx, container, name, args, kwargs)
        if isinstance(container, TupleVariable):
            items = [i.as_constant() for i in container.items]
            return ConstantVariable(getattr(items, name)(*[a.as_constant() for a in args]))
        raise Unsupported(f"method {name} of {container}")


upcalls.container_method.provide(ContainerMethodVariable)


def _list_method(tx: Tracer, lst: ListVariable, name: str, args: Args,
                 kwargs: Kwargs) -> VariableTracker:
    if name in ("append", "extend") and lst.is_unread:
        # Appending needs nothing of the existing items: they stay unread (and their length unguarded).
        lst.appended.extend([args[0]] if name == "append" else _items(tx, args[0]))
    elif name == "append":
        lst.items.append(args[0])
    elif name == "extend":
        lst.items.extend(_items(tx, args[0]))
    elif name == "insert":
        lst.items.insert(args[0].as_constant(), args[1])
    elif name == "pop":
        item = lst.items.pop(args[0].as_constant() if args else -1)
        lst.mark_mutated(tx)
        return item
    elif name == "clear":
        lst.items.clear()
    elif name == "reverse":
        lst.items.reverse()
    elif name == "copy":
        return ListVariable(list(lst.items))
    elif name == "sort":
        lst.items = _sorted(tx, [ListVariable(lst.items)], kwargs).items  # type: ignore[attr-defined]
    elif name in ("index", "count", "remove"):
        if not all(i.is_constant() for i in lst.items):
            raise Unsupported(f"list.{name} over tensors")
        values = [i.as_constant() for i in lst.items]
        result = getattr(values, name)(args[0].as_constant())
        if name == "remove":
            lst.items = [ConstantVariable(v) for v in values]
            lst.mark_mutated(tx)
            return ConstantVariable(None)
        return ConstantVariable(result)
    else:
        raise Unsupported(f"list.{name}")
    lst.mark_mutated(tx)
    return ConstantVariable(None)


def _dict_method(tx: Tracer, d: DictVariable, name: str, args: Args, kwargs: Kwargs) -> VariableTracker:
    if name in ("items", "keys", "values"):
        return DictViewVariable.of(d, name)
    if name == "get":
        found = d.lookup(args[0].as_constant())
        return found if found is not None else args[1] if len(args) > 1 else ConstantVariable(None)
    if name == "copy":
        return DictVariable(dict(d.items))
    if name == "update":
        if len(args) > 1:
            raise Unsupported(f"update expected at most 1 argument, got {len(args)}", user_error=True)
        for key, value in _dict_entries(tx, args, kwargs).items():  # a dict, or pairs (a list of them, a zip)
            d.set_item(tx, key, value)
    elif name == "pop":
        key = args[0].as_constant()
        if key not in d.items and len(args) > 1:
            return args[1]
        if key not in d.items:
            raise Unsupported(f"KeyError: {key!r}", user_error=True)
        value = d.items.pop(key)
        d.mark_mutated(tx)
        return value
    elif name == "setdefault":
        key = args[0].as_constant()
        found = d.lookup(key)
        if found is None:
            found = args[1] if len(args) > 1 else ConstantVariable(None)
            d.set_item(tx, key, found)
        return found
    elif name == "clear":
        d.items.clear()
    else:
        raise Unsupported(f"dict.{name}")
    d.mark_mutated(tx)
    return ConstantVariable(None)
