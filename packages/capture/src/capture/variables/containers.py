"""Tuples, lists, dicts and iterators whose items are variable trackers."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from capture.sources import Source
from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


class TupleVariable(VariableTracker):
    """A tuple (or a named tuple such as torch.return_types.max when `cls` is set)."""

    def __init__(self, items: list[VariableTracker], source: Source | None = None, cls: type | None = None) -> None:
        self.items = list(items)
        self.source = source
        self.cls = cls

    def python_type(self) -> type:
        return self.cls or tuple

    def is_constant(self) -> bool:
        return self.cls is None and all(item.is_constant() for item in self.items)

    def as_constant(self) -> Any:
        return tuple(item.as_constant() for item in self.items)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        return list(self.items)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        fields = _fields_of(self.cls) if self.cls is not None else None
        if fields and name in fields:
            return self.items[list(fields).index(name)]
        if name in ("index", "count"):
            return upcalls.container_method(self, name)
        if fields and name in ("_asdict", "_replace", "_fields"):
            if name == "_fields":
                return ConstantVariable(tuple(fields))
            return NamedTupleMethodVariable(self, list(fields), name)
        raise Unsupported(f"attribute {name!r} of a tuple")

    def __repr__(self) -> str:
        return f"TupleVariable({self.items})"


def _fields_of(cls: type) -> list[str] | None:
    fields = getattr(cls, "_fields", None)
    if fields is not None:
        return list(fields)
    if hasattr(cls, "n_fields"):
        # torch.return_types are structseqs: field i is a member descriptor whose repr names it.
        import types as _types

        members = [(name, value) for name, value in vars(cls).items() if isinstance(value, _types.MemberDescriptorType)]
        try:
            probe = cls(tuple(range(cls.n_fields)))  # type: ignore[call-arg,attr-defined]
            return sorted((name for name, _ in members), key=lambda n: getattr(probe, n))
        except Exception:
            return None
    return None


LIST_METHODS = frozenset({"append", "extend", "pop", "insert", "index", "count", "clear", "reverse", "copy",
                          "remove", "sort"})
"""List methods traced on a `ListVariable` (others break the graph)."""
DICT_METHODS = frozenset({"items", "keys", "values", "get", "update", "pop", "setdefault", "clear", "copy"})
"""Dict methods traced on a `DictVariable`."""


class ListVariable(VariableTracker):
    """A list; when `source` is set it is an existing list whose mutations are replayed.

    An existing list made with `unread` reads its items (and guards its length and items) only when the
    trace first uses them (`items`): a list the region only appends to (a log that grows on every call)
    is not guarded on its length, and its appends are replayed as one ``extend`` (`appended`).
    """

    def __init__(self, items: list[VariableTracker], source: Source | None = None) -> None:
        self._items = list(items)
        self.source = source
        self.mutated = False
        self._read: Callable[[], list[VariableTracker]] | None = None
        self.appended: list[VariableTracker] = []  # items appended while `unread`

    @classmethod
    def unread(cls, source: Source, read: Callable[[], list[VariableTracker]]) -> ListVariable:
        """An existing list at `source` whose items `read()` wraps (with their guards) on first use."""
        lst = cls([], source)
        lst._read = read
        return lst

    @property
    def is_unread(self) -> bool:
        """The items were never used: only `appended` is known."""
        return self._read is not None

    @property
    def items(self) -> list[VariableTracker]:
        if self._read is not None:
            read, self._read = self._read, None
            self._items = [*read(), *self.appended]
            self.appended = []
        return self._items

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        self._read = None
        self.appended = []
        self._items = value

    def python_type(self) -> type:
        return list

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        return list(self.items)

    def mark_mutated(self, tx: Tracer) -> None:
        """Record that the list changed, so the change is replayed on the real list."""
        self.mutated = True
        if self.source is not None:
            tx.output.side_effects.track_container(self)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in LIST_METHODS:
            return upcalls.container_method(self, name)
        raise Unsupported(f"list method {name!r}")

    def __repr__(self) -> str:
        if self.is_unread:  # not read for a repr: reading guards the length
            return f"ListVariable(<unread {self.source}>, appended={self.appended})"
        return f"ListVariable({self._items})"


class DictVariable(VariableTracker):
    """A dict with constant keys; when `source` is set it is an existing dict whose mutations are replayed.

    An existing dict made with `unread` reads its entries (and guards its keys) only when the trace first uses
    them as a whole (`items`): a dict the region only assigns items to (``ACTIVATIONS["h"] = h``, a log keyed by
    step) is not guarded on its keys, and its assignments are replayed as one ``update`` (`assigned`). Until then
    ``d[k]``, ``d.get(k)`` and ``k in d`` read that one key (`lookup`), guarded by whether the dict has it (and its
    value by its own guards), so keys the region never looks at may come and go (a cache shared by the layers).
    """

    def __init__(self, items: dict[Any, VariableTracker], source: Source | None = None) -> None:
        self._items: dict[Any, VariableTracker] = dict(items)
        self.source = source
        self.mutated = False
        self._read: Callable[[], dict[Any, VariableTracker]] | None = None
        self._lookup: Callable[[Any], VariableTracker | None] | None = None
        self._looked_up: dict[Any, VariableTracker | None] = {}  # keys read one by one while `unread`
        self.assigned: dict[Any, VariableTracker] = {}  # items assigned while `unread`

    @classmethod
    def unread(cls, source: Source, read: Callable[[], dict[Any, VariableTracker]],
               lookup: Callable[[Any], VariableTracker | None] | None = None) -> DictVariable:
        """An existing dict at `source` whose entries `read()` wraps (with their guards) on first use as a whole;
        `lookup(key)` wraps one entry (None: missing), guarding only that key."""
        d = cls({}, source)
        d._read = read
        d._lookup = lookup
        return d

    @property
    def is_unread(self) -> bool:
        """The entries were never used as a whole: only `assigned` and the keys looked up are known."""
        return self._read is not None

    @property
    def was_read(self) -> bool:
        """Some entry (or the whole dict) was read."""
        return self._read is None or bool(self._looked_up)

    @property
    def items(self) -> dict[Any, VariableTracker]:
        if self._read is not None:
            read, self._read = self._read, None
            self._items = read()
            self._items.update(self.assigned)  # as eager: an existing key keeps its place, a new one goes last
            self.assigned = {}
            self._looked_up = {}
        return self._items

    @items.setter
    def items(self, value: dict[Any, VariableTracker]) -> None:
        self._read = None
        self.assigned = {}
        self._looked_up = {}
        self._items = value

    def lookup(self, key: Any) -> VariableTracker | None:
        """The entry at `key` (None: missing); while unread, reading only that key."""
        if self._read is None or self._lookup is None or not is_literal_key(key):
            return self.items.get(key)
        if key in self.assigned:
            return self.assigned[key]
        if key not in self._looked_up:
            self._looked_up[key] = self._lookup(key)
        return self._looked_up[key]

    def set_item(self, tx: Tracer, key: Any, value: VariableTracker) -> None:
        """``d[key] = value``: recorded without reading the dict while it is unread."""
        if self._read is not None:
            self.assigned[key] = value
        else:
            self._items[key] = value
        self.mark_mutated(tx)

    def python_type(self) -> type:
        return dict

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        return [ConstantVariable(key) for key in self.items]

    def mark_mutated(self, tx: Tracer) -> None:
        """Record that the dict changed, so the change is replayed on the real dict."""
        self.mutated = True
        if self.source is not None:
            tx.output.side_effects.track_container(self)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in DICT_METHODS:
            return upcalls.container_method(self, name)
        raise Unsupported(f"dict method {name!r}")

    def __repr__(self) -> str:
        if self.is_unread:  # not read for a repr: reading guards the keys
            return f"DictVariable(<unread {self.source}>, assigned={self.assigned})"
        return f"DictVariable({self._items})"


class IteratorVariable(VariableTracker):
    """An iterator over items known at trace time (from GET_ITER on a list, range, module list...)."""

    def __init__(self, items: list[VariableTracker]) -> None:
        self.items = list(items)
        self.position = 0

    def next_item(self) -> VariableTracker | None:
        """The next item, or None when exhausted."""
        if self.position >= len(self.items):
            return None
        item = self.items[self.position]
        self.position += 1
        return item

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        rest = self.items[self.position:]
        self.position = len(self.items)
        return rest

    def remaining(self) -> list[VariableTracker]:
        """Items not consumed yet (what a reconstructed iterator must yield)."""
        return self.items[self.position:]

    def __repr__(self) -> str:
        return f"IteratorVariable({self.remaining()})"


class DictIteratorVariable(IteratorVariable):
    """An iterator over a traced dict (or one of its views): like CPython's, it fails once the dict's size changed."""

    def __init__(self, items: list[VariableTracker], mapping: DictVariable) -> None:
        super().__init__(items)
        self.mapping = mapping
        self.size = len(mapping.items)

    def next_item(self) -> VariableTracker | None:
        if len(self.mapping.items) != self.size:
            message = "dictionary changed size during iteration"
            raise Unsupported(f"RuntimeError: {message}", user_error=True, exception=RuntimeError(message))
        return super().next_item()


def iterator_over(tx: Tracer, value: VariableTracker) -> IteratorVariable:
    """`iter(value)` (GET_ITER) on a tracker: a dict's iterator checks its dict's size on every step."""
    if isinstance(value, IteratorVariable):
        return value
    mapping = getattr(value, "mapping", None) if not isinstance(value, DictVariable) else value
    if isinstance(mapping, DictVariable):
        return DictIteratorVariable(value.iterate(tx), mapping)
    return IteratorVariable(value.iterate(tx))


class NamedTupleMethodVariable(VariableTracker):
    """`nt._asdict()` and `nt._replace(**changes)` of a traced named tuple."""

    def __init__(self, value: TupleVariable, fields: list[str], name: str) -> None:
        self.value = value
        self.fields = fields
        self.name = name

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        current = dict(zip(self.fields, self.value.items))
        if self.name == "_asdict":
            return DictVariable(current)
        unknown = set(kwargs) - set(self.fields)
        if unknown or args:
            raise Unsupported(f"_replace() got unexpected field names {sorted(unknown)}", user_error=True)
        current.update(kwargs)
        return TupleVariable([current[f] for f in self.fields], cls=self.value.cls)


def is_literal_key(key: Any) -> bool:
    """True for a dict key that guards and sources can spell as a literal: ``repr(key)`` evaluates back to an
    equal key where ``torch`` is in scope (str, int, bool, None, finite float, dtype, and tuples of them).

    Existing dicts with such keys are traced entry by entry (``TABLE[(device.type, dtype)]``); others stay
    opaque objects.
    """
    if key is None or type(key) in (str, int, bool, torch.dtype):
        return True
    if type(key) is float:
        return math.isfinite(key)
    return type(key) is tuple and all(is_literal_key(item) for item in key)


def plain_value(value: VariableTracker) -> Any:
    """The Python value of a constant, or of a plain list, tuple or dict of them (raises Unsupported otherwise).

    The list or dict is a new object: for arguments of pure functions folded at trace time (`math.prod`,
    `"-".join`), never for ones that may keep or mutate it.
    """
    if value.is_constant():
        return value.as_constant()
    if type(value) is ListVariable:
        return [plain_value(item) for item in value.items]
    if type(value) is TupleVariable and value.cls is None:
        return tuple(plain_value(item) for item in value.items)
    if type(value) is DictVariable:
        return {key: plain_value(item) for key, item in value.items.items()}
    raise Unsupported(f"{value} is not a Python constant")


def is_plain_value(value: VariableTracker) -> bool:
    """True when `plain_value(value)` succeeds."""
    try:
        plain_value(value)
    except Unsupported:
        return False
    return True
