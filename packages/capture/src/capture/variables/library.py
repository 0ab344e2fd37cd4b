"""Library callables capture models by what they do: `collections` types, `contextlib` contexts, itertools,
operator getters, enum/dataclasses/functools/inspect/os helpers, `torch.utils.checkpoint`, torch.func
transforms, grad-mode and autocast objects made outside the region.

`library_callable(value)` is consulted when an existing value is wrapped (see `builder.classify`): it
returns the tracker for a known callable or context object, or None.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import itertools
import operator
import os
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.utils.checkpoint

from capture.libraries import is_stdlib_or_skipped
from capture.variables.autocast import existing_autocast
from capture.variables.autograd_calls import CheckpointVariable, FunctorchTransformVariable, realize_value
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker, is_constant_value
from capture.variables.builtins import _class_of
from capture.variables.collections_types import (
    DefaultDictVariable,
    OrderedDictVariable,
    constant_elements,
    make_collection,
)
from capture.variables.common import Args, Kwargs, _items
from capture.variables.containers import (
    DictVariable,
    IteratorVariable,
    TupleVariable,
    is_plain_value,
    plain_value,
)
from capture.variables.context_managers import (
    GradModeFactoryVariable,
    NullContextVariable,
    ProfilerRangeVariable,
    SuppressVariable,
    grad_mode_of,
)
from capture.variables.dict_subclasses import plain_dict_subclass, subclass_instance
from capture.variables.folding import folded_callable
from capture.variables.functions import UserFunctionVariable
from capture.variables.objects import TRACE_TIME_FUNCTIONS, EnvironReadVariable, PythonObjectVariable
from capture.variables.pytree import pytree_callable
from capture.variables.rebuilding import CannotReconstruct
from capture.variables.user_objects import NewObjectVariable, construct_user_object, is_plain_user_class

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

_COLLECTION_TYPES = (collections.deque, collections.OrderedDict, collections.defaultdict, collections.Counter)
_CONTEXT_TYPES = (contextlib.suppress, contextlib.nullcontext, torch.autograd.profiler.record_function)
_ITERTOOLS = (itertools.product, itertools.combinations, itertools.combinations_with_replacement,
              itertools.permutations, itertools.islice, itertools.zip_longest, itertools.repeat,
              itertools.starmap, itertools.accumulate, itertools.compress, itertools.takewhile,
              itertools.dropwhile, itertools.pairwise, itertools.chain)
_INSPECT_PREDICATES = (inspect.isfunction, inspect.ismethod, inspect.isclass, inspect.isgeneratorfunction,
                       inspect.iscoroutinefunction, inspect.isbuiltin, inspect.ismodule, inspect.isroutine)
_OPERATOR_GETTERS = (operator.itemgetter, operator.attrgetter, operator.methodcaller)
_FUNCTORCH = {id(torch.func.vmap): torch.func.vmap, id(torch.vmap): torch.vmap, id(torch.func.grad): torch.func.grad,
              id(torch.func.grad_and_value): torch.func.grad_and_value, id(torch.func.jacrev): torch.func.jacrev,
              id(torch.func.jacfwd): torch.func.jacfwd, id(torch.func.hessian): torch.func.hessian}


def library_callable(value: Any) -> VariableTracker | None:
    """The tracker of a library callable capture models, or None."""
    folded = folded_callable(value)  # numpy on constants, importlib.util.find_spec, torch.Tensor.__radd__
    if folded is not None:
        return folded
    if isinstance(value, type):
        if value in _COLLECTION_TYPES:
            return CollectionTypeVariable(value, None)
        if value in _CONTEXT_TYPES:
            return ContextTypeVariable(value, None)
        if value in _ITERTOOLS:
            return ItertoolsVariable(value)
        if value in _OPERATOR_GETTERS:
            return OperatorGetterTypeVariable(value, None)
        return None
    if value is object.__new__:
        return ObjectNewVariable()
    if isinstance(value, torch.autocast):  # an autocast object made outside (`@torch.autocast(...)` keeps one)
        return existing_autocast(value)
    if isinstance(value, types.MethodType) and getattr(value, "__name__", "") == "clone":
        if grad_mode_of(value.__self__, True) is not None:  # the decorators' `ctx_factory`
            return GradModeFactoryVariable(value.__self__)
    if isinstance(value, types.BuiltinMethodType) and getattr(value, "__name__", "") == "fromkeys" and \
            _fromkeys_owner(getattr(value, "__self__", None)):
        return FromKeysVariable(cast(type, value.__self__))
    if value is collections.namedtuple:
        return NamedTupleFactoryVariable()
    if isinstance(value, functools._lru_cache_wrapper):
        return _cached_function(value)
    if value is functools.wraps:
        return WrapsVariable()
    if value is torch.jit.annotate:
        return AnnotateVariable()
    if value is os.getenv:
        return EnvironReadVariable("get")
    if any(value is predicate for predicate in _INSPECT_PREDICATES):
        return InspectPredicateVariable(value)
    if value is dataclasses.fields or value is dataclasses.replace:
        return DataclassFunctionVariable(value)
    if value is torch.utils.checkpoint.checkpoint:
        return CheckpointVariable()
    if id(value) in _FUNCTORCH and _FUNCTORCH[id(value)] is value:
        return FunctorchTransformVariable(cast(Callable[..., Any], value))
    tree_function = pytree_callable(value)  # torch.utils._pytree.tree_flatten, tree_map, ...
    if tree_function is not None:
        return tree_function
    if isinstance(value, types.BuiltinMethodType) and value == itertools.chain.from_iterable:  # bound anew on each read
        return ItertoolsVariable(value)
    return None


class CollectionTypeVariable(PythonObjectVariable):
    """`collections.deque`, `OrderedDict`, `defaultdict` or `Counter`: calling it makes a traced container."""

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        return make_collection(tx, self.value, args, kwargs)


class ContextTypeVariable(PythonObjectVariable):
    """`contextlib.suppress` or `contextlib.nullcontext`: calling it makes a traced context."""

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if self.value is torch.autograd.profiler.record_function:
            return ProfilerRangeVariable()
        if self.value is contextlib.nullcontext:
            if len(args) + len(kwargs) > 1:
                raise Unsupported("nullcontext() takes at most one argument", user_error=True)
            entered = args[0] if args else kwargs.get("enter_result", ConstantVariable(None))
            return NullContextVariable(entered)
        if kwargs:
            raise Unsupported("suppress() takes no keyword arguments", user_error=True)
        classes: list[type] = []
        for arg in args:
            cls = arg.as_constant() if arg.is_constant() else _class_of(arg)
            classes.extend(cls if isinstance(cls, tuple) else [cls])
        return SuppressVariable(tuple(classes))


class ItertoolsVariable(VariableTracker):
    """An itertools function over iterables known at trace time: the result is an iterator of trackers."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if self.fn is itertools.chain and name == "from_iterable":
            return ItertoolsVariable(itertools.chain.from_iterable)
        raise Unsupported(f"attribute {name!r} of {self.fn}")

    def reconstruct(self, rebuild: Any) -> str:
        """The real itertools callable."""
        return str(rebuild.constant(self.fn))

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        fn = self.fn
        if fn == itertools.chain.from_iterable:
            return IteratorVariable([item for part in _items(tx, args[0]) for item in _items(tx, part)])
        if fn in (itertools.starmap, itertools.takewhile, itertools.dropwhile) or \
                (fn is itertools.accumulate and (len(args) > 1 or "func" in kwargs)):
            return IteratorVariable(self._with_callback(tx, args, kwargs))
        # Run the real function over item indices (or constants), then map the indices back to trackers.
        pools: list[list[VariableTracker]] = []
        proxies: list[Any] = []
        for arg in args:
            if arg.is_constant() and not isinstance(arg.as_constant(), (range, tuple, list, str)):
                proxies.append(arg.as_constant())  # a count such as product's repeat or islice's stop
                continue
            if isinstance(arg, IteratorVariable) and fn in (itertools.islice, itertools.pairwise):
                raise Unsupported(f"itertools.{fn.__name__} over a shared iterator")  # it consumes lazily
            items = _items(tx, arg) if not (fn is itertools.repeat and not pools) else [arg]
            if fn is not itertools.repeat and all(item.is_constant() for item in items):
                proxies.append([item.as_constant() for item in items])  # the function may look at them
            else:
                proxies.append([_Index(len(pools), i) for i in range(len(items))] if fn is not itertools.repeat
                               else _Index(len(pools), 0))
            pools.append(items)
        consts = {k: v.as_constant() for k, v in kwargs.items() if k != "fillvalue"}
        if "fillvalue" in kwargs:
            pools.append([kwargs["fillvalue"]])
            consts["fillvalue"] = _Index(len(pools) - 1, 0)
        if fn is itertools.compress and not all(item.is_constant() for item in pools[-1]):
            raise Unsupported("itertools.compress with traced selectors")
        if fn is itertools.accumulate:
            if not all(item.is_constant() for pool in pools for item in pool):
                raise Unsupported("itertools.accumulate over traced values without a function")
            values = [item.as_constant() for item in pools[0]]
            return IteratorVariable([ConstantVariable(v) for v in fn(values, **consts)])
        try:
            produced = list(itertools.islice(fn(*proxies, **consts), 100_000))
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        return IteratorVariable([_back(pools, item) for item in produced])

    def _with_callback(self, tx: Tracer, args: Args, kwargs: Kwargs) -> list[VariableTracker]:
        fn, callback = self.fn, args[0]
        if fn is itertools.accumulate:
            callback = kwargs.get("func", args[1] if len(args) > 1 else None)  # type: ignore[assignment]
            items = _items(tx, args[0])
            total: VariableTracker | None = kwargs.get("initial")
            out: list[VariableTracker] = [] if total is None else [total]
            for item in items:
                total = item if total is None else callback.call(tx, [total, item], {})
                out.append(total)
            return out
        items = _items(tx, args[1])
        if fn is itertools.starmap:
            return [callback.call(tx, item.iterate(tx), {}) for item in items]
        kept: list[VariableTracker] = []
        for index, item in enumerate(items):
            if not callback.call(tx, [item], {}).truth(tx):
                return kept if fn is itertools.takewhile else items[index:]
            if fn is itertools.takewhile:
                kept.append(item)
        return kept if fn is itertools.takewhile else []


class _Index:
    """Stands for item `index` of argument `pool` while the real itertools function runs."""

    __slots__ = ("index", "pool")

    def __init__(self, pool: int, index: int) -> None:
        self.pool = pool
        self.index = index


def _back(pools: list[list[VariableTracker]], value: Any) -> VariableTracker:
    if isinstance(value, _Index):
        return pools[value.pool][value.index]
    if isinstance(value, tuple):
        return TupleVariable([_back(pools, item) for item in value])
    return ConstantVariable(value)


# --- operator.itemgetter / attrgetter / methodcaller ------------------------------------------------


class OperatorGetterTypeVariable(PythonObjectVariable):
    """`operator.itemgetter`, `attrgetter` or `methodcaller`: calling it makes a traced getter."""

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if self.value is not operator.methodcaller and (kwargs or not args):
            raise Unsupported(f"{self.value.__name__}() expects at least one positional argument", user_error=True)
        return OperatorGetterVariable(self.value, args, kwargs)


class OperatorGetterVariable(VariableTracker):
    """A getter made in the region: `itemgetter(1)(x)` is `x[1]`, `attrgetter("a.b")(x)` is `x.a.b`, ..."""

    def __init__(self, kind: type, args: Args, kwargs: Kwargs) -> None:
        self.kind = kind
        self.args = args
        self.kwargs = kwargs

    def python_type(self) -> type:
        return self.kind

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.kind.__name__} object expects one argument", user_error=True)
        (target,) = args
        if self.kind is operator.methodcaller:
            name = self.args[0].as_constant()
            return tx.get_attribute(target, name).call(tx, list(self.args[1:]), dict(self.kwargs))
        results: list[VariableTracker] = []
        for key in self.args:
            if self.kind is operator.itemgetter:
                results.append(tx.apply_operator(operator.getitem, [target, key]))
                continue
            value = target
            for part in str(key.as_constant()).split("."):
                value = tx.get_attribute(value, part)
            results.append(value)
        return results[0] if len(results) == 1 else TupleVariable(results)

    def reconstruct(self, rebuild: Any) -> str:
        """The real getter, when its arguments are constants."""
        if not all(a.is_constant() for a in [*self.args, *self.kwargs.values()]):
            raise CannotReconstruct(f"cannot rebuild {self.kind.__name__} over traced values")
        real = self.kind(*[a.as_constant() for a in self.args], **{k: v.as_constant() for k, v in self.kwargs.items()})
        return str(rebuild.constant(real))


# --- object.__new__, dict.fromkeys, lru_cache, dataclasses --------------------------------------


class ObjectNewVariable(VariableTracker):
    """`object.__new__(cls)` (also reached as `cls.__new__(cls)`): a new, uninitialized user object."""

    def python_type(self) -> type:
        return types.BuiltinFunctionType

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        cls = getattr(args[0], "value", None) if args else None
        if len(args) != 1 or kwargs or not isinstance(cls, type) or not is_plain_user_class(cls):
            raise Unsupported("object.__new__ of something other than a plain user class")
        return NewObjectVariable(cls)

    def reconstruct(self, rebuild: Any) -> str:
        """The real `object.__new__`."""
        return str(rebuild.constant(object.__new__))


class FromKeysVariable(VariableTracker):
    """`dict.fromkeys(keys, value=None)` (or `OrderedDict.fromkeys`): every key maps to the same value."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if not args or len(args) > 2 or kwargs:
            raise Unsupported("fromkeys() expects one or two positional arguments", user_error=True)
        value = args[1] if len(args) > 1 else ConstantVariable(None)
        entries = {key: value for key in constant_elements(tx, _items(tx, args[0]), "dict keys")}
        if self.cls is collections.defaultdict:
            return DefaultDictVariable(ConstantVariable(None), entries)  # no default factory
        if self.cls not in (dict, collections.OrderedDict):
            return subclass_instance(self.cls, entries)
        return OrderedDictVariable(entries) if self.cls is collections.OrderedDict else DictVariable(entries)

    def reconstruct(self, rebuild: Any) -> str:
        """The real `fromkeys`."""
        return f"{rebuild.constant(self.cls)}.fromkeys"


def _fromkeys_owner(cls: Any) -> bool:
    """True for the classes whose `fromkeys` is modelled: dict, OrderedDict, defaultdict, plain subclasses."""
    return cls in (dict, collections.OrderedDict, collections.defaultdict) or plain_dict_subclass(cls)


class NamedTupleFactoryVariable(VariableTracker):
    """`collections.namedtuple(name, fields, ...)` called in the region with constant arguments: the class
    is made at trace time (named after the calling module, as eager names it) and its instances are traced
    as named tuples. Each compiled call hands out that one class, not a new one per call."""

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if not all(is_plain_value(v) for v in [*args, *kwargs.values()]):
            raise Unsupported("collections.namedtuple() with traced arguments")
        options = {k: plain_value(v) for k, v in kwargs.items()}
        options.setdefault("module", tx.f_globals.get("__name__"))
        try:
            cls = collections.namedtuple(*[plain_value(a) for a in args], **options)  # type: ignore[misc]
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        tx.output.keepalive.append(cls)
        return tx.output.wrap_value(cls, None)

    def reconstruct(self, rebuild: Any) -> str:
        """The real `collections.namedtuple`."""
        return str(rebuild.constant(collections.namedtuple))


def _cached_function(value: Any) -> VariableTracker | None:
    """A `functools.lru_cache` function: its wrapped function is inlined (caching does not change results)."""
    wrapped = getattr(value, "__wrapped__", None)
    if not isinstance(wrapped, types.FunctionType) or is_stdlib_or_skipped(wrapped):
        return None
    if f"{wrapped.__module__}.{wrapped.__qualname__}" in TRACE_TIME_FUNCTIONS:
        return None  # called for real while tracing (transformers' `warning_once`: its cache is the point)
    return UserFunctionVariable(wrapped)


class DataclassFunctionVariable(VariableTracker):
    """`dataclasses.fields(obj)` and `dataclasses.replace(obj, **changes)`."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if len(args) != 1:
            raise Unsupported(f"{self.fn.__name__}() takes one positional argument", user_error=True)
        target = args[0]
        cls = target.value if isinstance(target, PythonObjectVariable) and isinstance(target.value, type) \
            else target.python_type()
        if not dataclasses.is_dataclass(cls):
            raise Unsupported(f"{self.fn.__name__}() should be called on dataclass instances", user_error=True)
        fields = dataclasses.fields(cls)
        if self.fn is dataclasses.fields:
            return TupleVariable([PythonObjectVariable(field, None) for field in fields])
        values = {field.name: kwargs.get(field.name) or tx.get_attribute(target, field.name)
                  for field in fields if field.init}
        return construct_user_object(tx, PythonObjectVariable(cls, None), [], values)

    def reconstruct(self, rebuild: Any) -> str:
        """The real dataclasses function."""
        return str(rebuild.constant(self.fn))


class WrapsVariable(VariableTracker):
    """`functools.wraps(fn)` in the region: the decorated wrapper is returned as it is.

    (The copied `__name__`, `__doc__`, ... are not modelled; reading them from the wrapper is a graph break.)
    """

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        return _IdentityDecoratorVariable()

    def reconstruct(self, rebuild: Any) -> str:
        """The real `functools.wraps`."""
        return str(rebuild.constant(functools.wraps))


class _IdentityDecoratorVariable(VariableTracker):
    """The decorator `functools.wraps(fn)` returns, as traced: gives back the function it decorates."""

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported("functools.wraps(...) decorator expects one function", user_error=True)
        return args[0]


# --- os.environ, inspect predicates, structseq comparisons ----------------------------------------


class InspectPredicateVariable(VariableTracker):
    """`inspect.isfunction(f)` and friends on a value known at trace time."""

    def __init__(self, predicate: Callable[[Any], bool]) -> None:
        self.predicate = predicate

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported(f"{self.predicate.__name__}() takes one argument", user_error=True)
        return ConstantVariable(bool(self.predicate(realize_value(tx, args[0]))))

    def reconstruct(self, rebuild: Any) -> str:
        """The real predicate."""
        return str(rebuild.constant(self.predicate))


def structseq_operator(tx: Tracer, fn: Any, left: VariableTracker,
                       right: VariableTracker) -> VariableTracker | None:
    """Comparisons with a tuple-like object of constants such as `sys.version_info` (guarded by value)."""
    sides = []
    for side in (left, right):
        if side.is_constant():
            sides.append(side.as_constant())
        elif isinstance(side, PythonObjectVariable) and isinstance(side.value, tuple) and \
                all(is_constant_value(item) for item in side.value):
            if side.source is not None and not side.source.guard_free:
                tx.output.guards.equals(side.source, side.value)
            sides.append(tuple(side.value))
        else:
            return None
    try:
        return ConstantVariable(fn(*sides))
    except TypeError as error:
        raise Unsupported(f"TypeError: {error}", user_error=True) from error


class AnnotateVariable(VariableTracker):
    """`torch.jit.annotate(type, value)`: the value itself (the type is for TorchScript only)."""

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if len(args) != 2 or kwargs:
            raise Unsupported("torch.jit.annotate() takes a type and a value", user_error=True)
        return args[1]

    def reconstruct(self, rebuild: Any) -> str:
        """The real `torch.jit.annotate`."""
        return str(rebuild.constant(torch.jit.annotate))
