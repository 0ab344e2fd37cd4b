"""Sets and the `collections` containers (deque, OrderedDict, defaultdict, Counter) made in the traced region.

A set holds constants only (hashable, known at trace time): it is a real Python `set` while tracing, so its
iteration order is the one eager Python gives. The other containers are the list and dict trackers with the
behaviour of their class on top (a missing key of a defaultdict calls its factory, of a Counter reads 0).
Each rebuilds itself as a new object of its own class when it outlives the graph.
"""

from __future__ import annotations

import collections
import operator
from typing import TYPE_CHECKING, Any

from capture.sources import AttrSource, ItemSource
from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.common import Args, Kwargs, _items, _wrap_result
from capture.variables.containers import DictVariable, ListVariable, TupleVariable, is_literal_key
from capture.variables.objects import PythonObjectVariable

if TYPE_CHECKING:
    from capture.symbolic.reconstruct import Reconstructor
    from capture.variables.tracer import Tracer

SET_METHODS = {"add", "discard", "remove", "pop", "clear", "update", "union", "intersection", "difference",
               "symmetric_difference", "issubset", "issuperset", "isdisjoint", "copy", "intersection_update",
               "difference_update", "symmetric_difference_update"}
_MUTATING_SET_METHODS = {"add", "discard", "remove", "pop", "clear", "update", "intersection_update",
                         "difference_update", "symmetric_difference_update"}


def constant_elements(tx: Tracer, items: list[VariableTracker], what: str) -> list[Any]:
    """The constant values of `items` (a graph break when one is a tensor or another traced value)."""
    values = []
    for item in items:
        if not item.is_constant():
            raise Unsupported(f"{what} of a traced value ({item}): only constant elements are tracked")
        values.append(item.as_constant())
    return values


def real_set(value: VariableTracker) -> set[Any] | frozenset[Any] | None:
    """The Python set behind a set tracker, a constant frozenset or a dict's keys view, else None."""
    if isinstance(value, SetVariable):
        return value.value
    if isinstance(value, DictViewVariable) and value.kind == "keys":
        return {item.as_constant() for item in value.items}
    if isinstance(value, DictViewVariable) and value.kind == "items" and all(item.is_constant() for item in value.items):
        return {item.as_constant() for item in value.items}  # (key, value) pairs of constants
    if value.is_constant() and isinstance(value.as_constant(), (set, frozenset)):
        return value.as_constant()  # type: ignore[no-any-return]
    return None


def _surely_not_a_set(value: VariableTracker) -> bool:
    """True when `value` is known not to be a set-like object (so `==` with a set is False)."""
    import collections.abc

    if isinstance(value, DictViewVariable):
        return False
    try:
        kind = value.python_type()
    except Unsupported:
        return False
    return not issubclass(kind, (collections.abc.Set, collections.abc.KeysView, collections.abc.ItemsView))


def wrap_set_result(result: Any) -> VariableTracker:
    """A set operation's result as a tracker (a new `set` is a new mutable tracker)."""
    if isinstance(result, set):
        return SetVariable(result)
    return _wrap_result(result)


class SetVariable(VariableTracker):
    """A mutable `set` of constants made in the region."""

    def __init__(self, value: set[Any]) -> None:
        self.value = value

    def python_type(self) -> type:
        return set

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        return [ConstantVariable(item) for item in self.value]

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in SET_METHODS:
            return SetMethodVariable(self, name)
        raise Unsupported(f"'set' object has no attribute '{name}'", user_error=True) from AttributeError(name)

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """`set((...))` built once per run."""
        inner = "".join(f"{rebuild.constant(item)}, " for item in self.value)
        return rebuild._once(self, f"set(({inner}))")

    def __repr__(self) -> str:
        return f"SetVariable({self.value!r})"


class SetMethodVariable(VariableTracker):
    """A method of a traced set, run on the real set of constants."""

    def __init__(self, target: SetVariable, name: str) -> None:
        self.target = target
        self.name = name

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """The bound method of the rebuilt container."""
        return f"{rebuild.expr(self.target)}.{self.name}"

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"set.{self.name}() takes no keyword arguments", user_error=True)
        values: list[Any] = []
        for arg in args:
            known = real_set(arg)
            if known is not None:
                values.append(known)
            elif arg.is_constant():
                values.append(arg.as_constant())
            else:
                values.append(constant_elements(tx, _items(tx, arg), f"set.{self.name}"))
        try:
            result = getattr(self.target.value, self.name)(*values)
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        return wrap_set_result(result)


def set_operator(fn: Any, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """`left <op> right` when a traced set is involved (None when neither side is one)."""
    if not any(isinstance(side, SetVariable) or (isinstance(side, DictViewVariable) and side.kind != "values")
               for side in (left, right)):
        return None
    left_value, right_value = real_set(left), real_set(right)
    if left_value is None or right_value is None:
        other = right if left_value is not None else left
        if fn in (operator.eq, operator.ne) and _surely_not_a_set(other):
            return ConstantVariable(fn is operator.ne)  # a set never equals a non-set
        raise Unsupported(f"operator {fn.__name__} between a set and {right if left_value is not None else left}")
    try:
        result = fn(left_value, right_value)  # in-place operators mutate the left set itself
    except Exception as error:
        raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    if result is left_value and isinstance(left, SetVariable):
        return left
    return wrap_set_result(result)


def make_set(tx: Tracer, cls: type, args: Args) -> VariableTracker:
    """`set(iterable)` / `frozenset(iterable)`."""
    if len(args) > 1:
        raise Unsupported(f"{cls.__name__} expected at most 1 argument, got {len(args)}", user_error=True)
    elements = constant_elements(tx, _items(tx, args[0]), cls.__name__) if args else []
    try:
        value = cls(elements)
    except TypeError as error:
        raise Unsupported(f"TypeError: {error}", user_error=True) from error
    return SetVariable(value) if cls is set else ConstantVariable(value)


class DictViewVariable(ListVariable):
    """`d.keys()`, `d.values()` or `d.items()`: a live view of a traced dict, rebuilt as a real view."""

    def __init__(self, mapping: DictVariable, kind: str = "keys") -> None:
        self.mapping = mapping
        self.kind = kind
        self.source = None
        self.mutated = False

    @classmethod
    def of(cls, d: DictVariable, kind: str) -> DictViewVariable:
        """The `kind` view of a traced dict."""
        return cls(d, kind)

    @property  # type: ignore[override]
    def items(self) -> list[VariableTracker]:
        """The view's entries now (a view follows later changes of its dict)."""
        d = self.mapping.items
        if self.kind == "keys":
            return [ConstantVariable(k) for k in d]
        if self.kind == "values":
            return list(d.values())
        return [TupleVariable([ConstantVariable(k), v]) for k, v in d.items()]

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        raise Unsupported(f"'dict_{self.kind}' object does not support item assignment", user_error=True)

    def python_type(self) -> type:
        return type(getattr({}, self.kind)())

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name == "isdisjoint" and self.kind == "keys":
            return SetMethodVariable(SetVariable(set(constant_elements(tx, self.items, "keys"))), name)
        raise Unsupported(f"'{self.python_type().__name__}' object has no attribute '{name}'")

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """The same view of the rebuilt (or existing) dict."""
        return f"{rebuild.expr(self.mapping)}.{self.kind}()"


# --- collections.deque -------------------------------------------------------------------------------

DEQUE_METHODS = {"append", "appendleft", "pop", "popleft", "extend", "extendleft", "rotate", "clear", "copy",
                 "count", "index", "insert", "remove", "reverse"}


class DequeVariable(ListVariable):
    """A `collections.deque` made in the region (its items may be tensors)."""

    def __init__(self, items: list[VariableTracker], maxlen: int | None) -> None:
        super().__init__(items[len(items) - maxlen:] if maxlen is not None else items)
        self.maxlen = maxlen

    def python_type(self) -> type:
        return collections.deque


    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        if name in DEQUE_METHODS:
            return DequeMethodVariable(self, name)
        raise Unsupported(f"'collections.deque' object has no attribute '{name}'", user_error=True)

    def trim(self, from_left: bool) -> None:
        """Drop items past `maxlen` from the side opposite to where items were added."""
        while self.maxlen is not None and len(self.items) > self.maxlen:
            del self.items[0 if from_left else -1]

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """`collections.deque([...], maxlen)` built once per run."""
        if self.source is not None:
            return self.source.expr()  # an existing object (its mutations are replayed)
        inner = ", ".join(rebuild.expr(item) for item in self.items)
        return rebuild._once(self, f"{rebuild.constant(collections.deque)}([{inner}], {self.maxlen!r})")

    def __repr__(self) -> str:
        return f"DequeVariable({self.items}, maxlen={self.maxlen})"


class DequeMethodVariable(VariableTracker):
    """A method of a traced deque."""

    def __init__(self, target: DequeVariable, name: str) -> None:
        self.target = target
        self.name = name

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """The bound method of the rebuilt container."""
        return f"{rebuild.expr(self.target)}.{self.name}"

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        deque, items, name = self.target, self.target.items, self.name
        if kwargs:
            raise Unsupported(f"deque.{name}() takes no keyword arguments", user_error=True)
        result: VariableTracker = ConstantVariable(None)
        if name == "append":
            items.append(args[0])
            deque.trim(from_left=True)
        elif name == "appendleft":
            items.insert(0, args[0])
            deque.trim(from_left=False)
        elif name in ("pop", "popleft"):
            if not items:
                raise Unsupported(f"IndexError: {name} from an empty deque", user_error=True) from IndexError(name)
            result = items.pop(-1 if name == "pop" else 0)
        elif name == "extend":
            items.extend(_items(tx, args[0]))
            deque.trim(from_left=True)
        elif name == "extendleft":
            for item in _items(tx, args[0]):
                items.insert(0, item)
            deque.trim(from_left=False)
        elif name == "rotate":
            steps = int(args[0].as_constant()) if args else 1
            if items:
                steps %= len(items)
                deque.items = items[len(items) - steps:] + items[:len(items) - steps]
        elif name == "clear":
            items.clear()
        elif name == "copy":
            return DequeVariable(list(items), deque.maxlen)
        elif name == "reverse":
            items.reverse()
        elif name == "insert":
            if deque.maxlen is not None and len(items) >= deque.maxlen:
                raise Unsupported("IndexError: deque already at its maximum size", user_error=True)
            items.insert(int(args[0].as_constant()), args[1])
        else:  # count, index, remove: by value, on constants only
            values = constant_elements(tx, items, f"deque.{name}")
            try:
                found = getattr(collections.deque(values), name)(*[a.as_constant() for a in args])
            except ValueError as error:
                raise Unsupported(f"ValueError: {error}", user_error=True) from error
            if name != "remove":
                return ConstantVariable(found)
            del items[values.index(args[0].as_constant())]
        deque.mark_mutated(tx)
        return result


def make_deque(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    """`collections.deque(iterable=(), maxlen=None)`."""
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen_var = args[1] if len(args) > 1 else kwargs.get("maxlen")
    maxlen = maxlen_var.as_constant() if maxlen_var is not None else None
    if maxlen is not None and (not isinstance(maxlen, int) or maxlen < 0):
        raise Unsupported("ValueError: maxlen must be a non-negative integer", user_error=True)
    return DequeVariable(_items(tx, iterable) if iterable is not None else [], maxlen)


# --- dict subclasses -------------------------------------------------------------------------------


def _dict_entries(tx: Tracer, args: Args, kwargs: Kwargs) -> dict[Any, VariableTracker]:
    """The entries `dict(*args, **kwargs)` would have."""
    entries: dict[Any, VariableTracker] = {}
    if args:
        source = args[0]
        if isinstance(source, DictVariable):
            entries.update(source.items)
        else:
            for number, pair in enumerate(_items(tx, source)):
                parts = pair.iterate(tx)
                if len(parts) != 2:
                    message = f"dictionary update sequence element #{number} has length {len(parts)}; 2 is required"
                    raise Unsupported(f"ValueError: {message}", user_error=True, exception=ValueError(message))
                entries[parts[0].as_constant()] = parts[1]
    entries.update(kwargs)
    return entries


def _render_entries(rebuild: Reconstructor, items: dict[Any, VariableTracker]) -> str:
    return "[" + ", ".join(f"({rebuild.constant(k)}, {rebuild.expr(v)})" for k, v in items.items()) + "]"


class OrderedDictVariable(DictVariable):
    """A `collections.OrderedDict` made in the region."""

    def python_type(self) -> type:
        return collections.OrderedDict

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in ("move_to_end", "popitem"):
            return OrderedDictMethodVariable(self, name)
        return super().getattr(tx, name)

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """`OrderedDict([(key, value), ...])` built once per run."""
        if self.source is not None:
            return self.source.expr()  # an existing object (its mutations are replayed)
        entries = _render_entries(rebuild, self.items)
        return rebuild._once(self, f"{rebuild.constant(collections.OrderedDict)}({entries})")


class OrderedDictMethodVariable(VariableTracker):
    """`move_to_end` and `popitem` of a traced OrderedDict."""

    def __init__(self, target: OrderedDictVariable, name: str) -> None:
        self.target = target
        self.name = name

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """The bound method of the rebuilt container."""
        return f"{rebuild.expr(self.target)}.{self.name}"

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        items = self.target.items
        last = bool((args[1] if len(args) > 1 else kwargs["last"]).as_constant()) \
            if len(args) > 1 or "last" in kwargs else True
        if self.name == "popitem":
            last = bool((args[0] if args else kwargs["last"]).as_constant()) if args or "last" in kwargs else True
            if not items:
                raise Unsupported("KeyError: dictionary is empty", user_error=True) from KeyError("popitem")
            key = list(items)[-1 if last else 0]
            value = items.pop(key)
            self.target.mark_mutated(tx)
            return TupleVariable([ConstantVariable(key), value])
        key = args[0].as_constant()
        if key not in items:
            raise Unsupported(f"KeyError: {key!r}", user_error=True) from KeyError(key)
        value = items.pop(key)
        if last:
            items[key] = value
        else:
            rest = dict(items)
            items.clear()
            items[key] = value
            items.update(rest)
        self.target.mark_mutated(tx)
        return ConstantVariable(None)


class DefaultDictVariable(DictVariable):
    """A `collections.defaultdict` made in the region: a missing key calls the factory."""

    def __init__(self, factory: VariableTracker, items: dict[Any, VariableTracker]) -> None:
        super().__init__(items)
        self.factory = factory

    def python_type(self) -> type:
        return collections.defaultdict

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name == "default_factory":
            return self.factory
        return super().getattr(tx, name)

    def missing(self, tx: Tracer, key: Any) -> None:
        """`d[key]` on a missing key: store `factory()` under it, as `defaultdict.__missing__` does."""
        if self.factory.is_constant() and self.factory.as_constant() is None:
            raise Unsupported(f"KeyError: {key!r}", user_error=True) from KeyError(key)
        self.items[key] = self.factory.call(tx, [], {})
        self.mark_mutated(tx)

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """`defaultdict(factory, [(key, value), ...])` built once per run."""
        if self.source is not None:
            return self.source.expr()  # an existing object (its mutations are replayed)
        entries = _render_entries(rebuild, self.items)
        factory = rebuild.expr(self.factory)
        return rebuild._once(self, f"{rebuild.constant(collections.defaultdict)}({factory}, {entries})")


COUNTER_METHODS = {"most_common", "elements", "total", "update", "subtract"}


class CounterVariable(DictVariable):
    """A `collections.Counter` made in the region; a missing key counts 0."""

    def python_type(self) -> type:
        return collections.Counter

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in COUNTER_METHODS:
            return CounterMethodVariable(self, name)
        return super().getattr(tx, name)

    def real(self) -> collections.Counter[Any]:
        """The counter as a real `Counter` (its counts must be constants)."""
        if not all(v.is_constant() for v in self.items.values()):
            raise Unsupported("a Counter whose counts are traced values")
        return collections.Counter({k: v.as_constant() for k, v in self.items.items()})

    def assign(self, counter: collections.Counter[Any]) -> None:
        """Replace the entries with those of `counter` (after an in-place operation)."""
        self.items.clear()
        self.items.update({k: ConstantVariable(v) for k, v in counter.items()})

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """`Counter({key: count, ...})` built once per run."""
        if self.source is not None:
            return self.source.expr()  # an existing object (its mutations are replayed)
        entries = "{" + ", ".join(f"{rebuild.constant(k)}: {rebuild.expr(v)}" for k, v in self.items.items()) + "}"
        return rebuild._once(self, f"{rebuild.constant(collections.Counter)}({entries})")


class CounterMethodVariable(VariableTracker):
    """A Counter method, run on a real Counter of the constant counts."""

    def __init__(self, target: CounterVariable, name: str) -> None:
        self.target = target
        self.name = name

    def reconstruct(self, rebuild: Reconstructor) -> str:
        """The bound method of the rebuilt container."""
        return f"{rebuild.expr(self.target)}.{self.name}"

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        counter = self.target.real()
        values = [counter_argument(tx, a) for a in args]
        const_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
        try:
            result = getattr(counter, self.name)(*values, **const_kwargs)
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        if self.name in ("update", "subtract"):
            self.target.assign(counter)
            self.target.mark_mutated(tx)
            return ConstantVariable(None)
        if self.name == "elements":
            result = list(result)
        return _wrap_result(result)


def counter_argument(tx: Tracer, value: VariableTracker) -> Any:
    """A Counter method's argument as a real value: a counter, a mapping or an iterable of constants."""
    if isinstance(value, CounterVariable):
        return value.real()
    if isinstance(value, DictVariable):
        return {k: v.as_constant() for k, v in value.items.items()}
    if value.is_constant():
        return value.as_constant()
    return constant_elements(tx, _items(tx, value), "Counter")


def view_operator(fn: Any, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """`==` / `!=` with a dict's values view: views compare by identity."""
    if fn not in (operator.eq, operator.ne) or not any(
            isinstance(side, DictViewVariable) and side.kind == "values" for side in (left, right)):
        return None
    return ConstantVariable((left is right) == (fn is operator.eq))


def counter_operator(fn: Any, left: VariableTracker, right: VariableTracker) -> VariableTracker | None:
    """`counter <op> counter` (+, -, |, &, and their in-place forms)."""
    if not isinstance(left, CounterVariable) or not isinstance(right, CounterVariable):
        return None
    try:
        result = fn(left.real(), right.real())
    except Exception as error:
        raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    if not isinstance(result, collections.Counter):
        return _wrap_result(result)
    if fn in (operator.iadd, operator.isub, operator.ior, operator.iand):
        left.assign(result)
        return left
    made = CounterVariable({})
    made.assign(result)
    return made


def make_counter(tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
    """`collections.Counter(iterable_or_mapping, **counts)`."""
    real: collections.Counter[Any] = collections.Counter()
    if args:
        real.update(counter_argument(tx, args[0]))
    if kwargs:
        real.update({k: v.as_constant() for k, v in kwargs.items()})
    made = CounterVariable({})
    made.assign(real)
    return made


def make_collection(tx: Tracer, cls: type, args: Args, kwargs: Kwargs) -> VariableTracker:
    """A new `collections` container of class `cls`."""
    if cls is collections.deque:
        return make_deque(tx, args, kwargs)
    if cls is collections.Counter:
        return make_counter(tx, args, kwargs)
    if cls is collections.OrderedDict:
        return OrderedDictVariable(_dict_entries(tx, args, kwargs))
    if cls is collections.defaultdict:
        factory = args[0] if args else ConstantVariable(None)
        return DefaultDictVariable(factory, _dict_entries(tx, list(args[1:]), kwargs))
    raise Unsupported(f"constructing {cls.__name__}")



# --- existing containers, read through a source ------------------------------------------------------

_EXISTING_KINDS = (collections.OrderedDict, collections.defaultdict, collections.Counter, collections.deque)


@upcalls.existing_collection.provide
def existing_collection(tx: Tracer, value: VariableTracker) -> VariableTracker | None:
    """The container tracker of an existing OrderedDict, defaultdict, Counter or deque (None for others).

    Made once per object (later reads get the same tracker, so mutations are seen through every path):
    its keys (or length) are guarded, and each item is wrapped with its own guards.
    """
    if not isinstance(value, PythonObjectVariable) or value.source is None or type(value.value) not in _EXISTING_KINDS:
        return None
    real, source, output = value.value, value.source, tx.output
    known = output._by_id.get(id(real))
    if known is not None and known is not value and not isinstance(known, PythonObjectVariable):
        return known
    expr = source.expr()
    tracker: VariableTracker
    if isinstance(real, collections.deque):
        output.guards.add("LENGTH", source, f"len({expr}) == {len(real)}", f"len({expr}) == {len(real)}")
        output.guards.add("DEQUE_MAXLEN", source, f"{expr}.maxlen == {real.maxlen!r}", f"{expr}.maxlen == {real.maxlen!r}")
        items = [output.wrap_value(item, ItemSource(source, i)) for i, item in enumerate(real)]
        tracker = DequeVariable(items, real.maxlen)
    else:
        keys = list(real.keys())
        if not all(is_literal_key(k) for k in keys):
            return None
        output.guards.add("DICT_KEYS", source, f"list({expr}.keys()) == {keys!r}", f"keys of {expr} are {keys!r}")
        entries = {k: output.wrap_value(real[k], ItemSource(source, k)) for k in keys}
        if isinstance(real, collections.Counter):
            tracker = CounterVariable(entries)
        elif isinstance(real, collections.defaultdict):
            factory = output.wrap_value(real.default_factory, AttrSource(source, "default_factory"))
            tracker = DefaultDictVariable(factory, entries)
        else:
            tracker = OrderedDictVariable(entries)
    tracker.source = source
    output._by_id[id(real)] = tracker
    return tracker
