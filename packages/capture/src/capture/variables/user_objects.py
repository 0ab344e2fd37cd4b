"""Instances of user classes created inside the traced region (plain classes, dataclasses, namedtuples)."""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any, cast

from capture.libraries import SKIPPED_LIBRARIES, is_stdlib_or_skipped
from capture.variables import upcalls
from capture.variables.base import (
    ConstantVariable,
    Unsupported,
    VariableTracker,
    class_attribute,
    is_constant_value,
)
from capture.variables.containers import DictVariable, TupleVariable
from capture.variables.functions import BoundMethodVariable, UserFunctionVariable
from capture.variables.rebuilding import new_object

if TYPE_CHECKING:
    from capture.variables.objects import PythonObjectVariable
    from capture.variables.tracer import Tracer

DUNDERS = {"add": "__add__", "sub": "__sub__", "mul": "__mul__", "truediv": "__truediv__",
           "matmul": "__matmul__", "neg": "__neg__", "getitem": "__getitem__", "eq": "__eq__", "lt": "__lt__",
           "le": "__le__", "gt": "__gt__", "ge": "__ge__", "ne": "__ne__", "pow": "__pow__",
           "floordiv": "__floordiv__", "mod": "__mod__"}
REVERSED = {"__add__": "__radd__", "__sub__": "__rsub__", "__mul__": "__rmul__", "__truediv__": "__rtruediv__",
            "__matmul__": "__rmatmul__", "__pow__": "__rpow__"}


def is_plain_user_class(cls: type) -> bool:
    """True for classes whose instances capture models field by field (no custom `__new__`, no builtin base)."""
    module = (cls.__module__ or "").split(".")[0]
    import abc

    if module in ("builtins", "torch") or module in SKIPPED_LIBRARIES or type(cls) not in (type, abc.ABCMeta):
        return False
    if getattr(cls, "__abstractmethods__", None):
        return False
    for klass in cls.__mro__[:-1]:
        if klass.__module__ == "builtins":
            return False
    return cast(object, cls.__new__) is object.__new__ and (cls.__dictoffset__ != 0 or _is_slotted(cls))


def _is_slotted(cls: type) -> bool:
    """True for a class whose instances have only `__slots__` storage (no instance dict)."""
    return cls.__dictoffset__ == 0 and all("__slots__" in klass.__dict__ for klass in cls.__mro__[:-1])


def construct_user_object(tx: Tracer, cls_var: PythonObjectVariable, args: list[VariableTracker],
                          kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`cls(*args, **kwargs)` for a user class: a new object whose `__init__` is inlined."""
    cls = cls_var.value
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return _construct_namedtuple(cls, args, kwargs)
    if isinstance(cls, type) and not is_plain_user_class(cls) and _is_frozen_dataclass(cls) and \
            all(value.is_constant() for value in [*args, *kwargs.values()]):
        return _frozen_constant(tx, cls, args, kwargs)
    dict_subclass = upcalls.construct_dict_subclass(tx, cls, args, kwargs)  # variables/dict_subclasses.py
    if dict_subclass is not None:
        return dict_subclass
    if not isinstance(cls, type) or not is_plain_user_class(cls):
        raise Unsupported(f"call to type object {getattr(cls, '__module__', '')}.{getattr(cls, '__qualname__', cls)}")
    instance = NewObjectVariable(cls)
    init = class_attribute(cls, "__init__")
    if init is object.__init__:
        if args or kwargs:
            raise Unsupported(f"{cls.__name__}() takes no arguments", user_error=True)
        return instance
    if not isinstance(init, types.FunctionType):
        raise Unsupported(f"{cls.__name__}.__init__ is not a Python function")
    UserFunctionVariable(init).call(tx, [instance, *args], kwargs)
    return instance


def _is_frozen_dataclass(cls: type) -> bool:
    params = cls.__dict__.get("__dataclass_params__")
    return params is not None and bool(getattr(params, "frozen", False))


def _frozen_constant(tx: Tracer, cls: type, args: list[VariableTracker],
                     kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """A frozen dataclass given only constants (a library's options object such as torch's
    ``LinearCrossEntropyOptions``, whose slotted class cannot be modelled field by field): made for real
    at trace time. It can never change, so it is a constant of the trace; a constructor that raises
    (``__post_init__`` validation) is a graph break that raises again in eager."""
    try:
        value = cls(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as error:
        raise Unsupported(f"{cls.__name__}(...) raised {type(error).__name__}: {error}", user_error=True) from error
    tx.output.keepalive.append(value)
    return tx.output.wrap_value(value, None)


def _construct_namedtuple(cls: type, args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> VariableTracker:
    fields = list(cls._fields)  # type: ignore[attr-defined]
    defaults = getattr(cls, "_field_defaults", {})
    values: dict[str, VariableTracker] = dict(zip(fields, args))
    values.update(kwargs)
    for name in fields:
        if name not in values:
            if name not in defaults:
                raise Unsupported(f"{cls.__name__}() missing argument '{name}'", user_error=True)
            values[name] = ConstantVariable(defaults[name])
    return TupleVariable([values[name] for name in fields], cls=cls)


class NewObjectVariable(VariableTracker):
    """An object of a user class made in the region: its attributes are tracked symbolically."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.attrs: dict[str, VariableTracker] = {}

    def python_type(self) -> type:
        return self.cls

    def truth(self, tx: Tracer) -> bool:
        if hasattr(self.cls, "__bool__") or hasattr(self.cls, "__len__"):
            raise Unsupported(f"truth value of a {self.cls.__name__} with __bool__/__len__")
        return True

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return tx.output.wrap_value(self.cls, None)
        if name == "__dict__":
            return DictVariable(dict(self.attrs))
        try:
            static = inspect.getattr_static(self.cls, name)
        except AttributeError:
            fallback = getattr(self.cls, "__getattr__", None)
            if isinstance(fallback, types.FunctionType):
                return UserFunctionVariable(fallback).call(tx, [self, ConstantVariable(name)], {})
            message = f"'{self.cls.__name__}' object has no attribute '{name}'"
            raise Unsupported(message, user_error=True) from AttributeError(message)
        return bind_class_attribute(tx, self, self.cls, static, name)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        method = getattr(self.cls, "__iter__", None)
        if not isinstance(method, types.FunctionType):
            raise Unsupported(f"'{self.cls.__name__}' object is not iterable", user_error=True)
        return UserFunctionVariable(method).call(tx, [self], {}).iterate(tx)

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        method = class_attribute(self.cls, "__call__")
        if not isinstance(method, types.FunctionType):
            raise Unsupported(f"'{self.cls.__name__}' object is not callable", user_error=True)
        return UserFunctionVariable(method).call(tx, [self, *args], kwargs)

    def setattr(self, tx: Tracer, name: str, value: VariableTracker) -> None:
        """`obj.name = value` (through a property's setter when the class defines one)."""
        try:
            static = inspect.getattr_static(self.cls, name)
        except AttributeError:
            static = None
        if isinstance(static, property):
            if static.fset is None:
                raise Unsupported(f"property '{name}' of '{self.cls.__name__}' has no setter", user_error=True)
            UserFunctionVariable(static.fset).call(tx, [self, value], {})  # type: ignore[arg-type]
            return
        if isinstance(static, types.MemberDescriptorType) and _is_slotted(self.cls):
            self.attrs[name] = value  # a slot
            return
        if static is not None and hasattr(type(static), "__set__"):
            raise Unsupported(f"attribute '{name}' is set through a descriptor")
        if _is_slotted(self.cls):
            message = f"'{self.cls.__name__}' object has no attribute '{name}'"
            raise Unsupported(f"AttributeError: {message}", user_error=True, exception=AttributeError(message))
        self.attrs[name] = value

    def reconstruct(self, rebuild: Any) -> str:
        """A new instance with the attributes the region gave it (slots are set one by one)."""
        if not _is_slotted(self.cls):
            attrs = "{" + ", ".join(f"{k!r}: {rebuild.expr(v)}" for k, v in self.attrs.items()) + "}"
            return str(rebuild._once(self, f"{rebuild.constant(new_object)}({rebuild.constant(self.cls)}, {attrs})"))
        attrs = "{" + ", ".join(f"{k!r}: {rebuild.expr(v)}" for k, v in self.attrs.items()) + "}"
        return str(rebuild._once(self, f"{rebuild.constant(new_slotted_object)}({rebuild.constant(self.cls)}, {attrs})"))

    def __repr__(self) -> str:
        return f"NewObjectVariable({self.cls.__name__})"


def new_slotted_object(cls: type, attrs: dict[str, Any]) -> Any:
    """Rebuild an object of a `__slots__` class made in the traced region."""
    instance: Any = object.__new__(cls)
    for name, value in attrs.items():
        object.__setattr__(instance, name, value)
    return instance


def bind_class_attribute(tx: Tracer, receiver: VariableTracker, cls: type, static: Any,
                         name: str) -> VariableTracker:
    """A class attribute seen through an instance: methods bind, properties run, constants fold."""
    if isinstance(static, types.FunctionType):
        return BoundMethodVariable(UserFunctionVariable(static), receiver)
    if isinstance(static, staticmethod):
        return tx.output.wrap_value(static.__func__, None)
    if isinstance(static, classmethod):
        return BoundMethodVariable(tx.output.wrap_value(static.__func__, None), tx.output.wrap_value(cls, None))
    if isinstance(static, property) and isinstance(static.fget, types.FunctionType):
        return UserFunctionVariable(static.fget).call(tx, [receiver], {})
    if is_constant_value(static):
        return ConstantVariable(static)
    if isinstance(static, types.MemberDescriptorType) and isinstance(receiver, NewObjectVariable):
        message = f"'{cls.__name__}' object has no attribute '{name}'"  # a slot never assigned
        raise Unsupported(f"AttributeError: {message}", user_error=True, exception=AttributeError(message))
    if hasattr(type(static), "__get__"):
        raise Unsupported(f"descriptor {name!r} of {cls.__name__}")
    return tx.output.wrap_value(static, None)


def dunder_call(tx: Tracer, op_name: str, args: list[VariableTracker]) -> VariableTracker | None:
    """Python-level operator overloading on user objects (`__add__`, `__radd__`, ...), or None."""
    dunder = DUNDERS.get(op_name.strip("_").replace("i", "", 1) if op_name.startswith("i") and
                         op_name not in DUNDERS else op_name)
    if dunder is None:
        return None
    left = args[0]
    try:
        left_type = left.python_type()
    except Unsupported:
        left_type = None
    method = getattr(left_type, dunder, None) if left_type is not None else None
    if isinstance(method, types.FunctionType) and not is_stdlib_or_skipped(method):
        result = UserFunctionVariable(method).call(tx, list(args), {})
        if not (result.is_constant() and result.as_constant() is NotImplemented):
            return result
    if len(args) == 2 and dunder in REVERSED:
        try:
            right_type = args[1].python_type()
        except Unsupported:
            return None
        reflected = getattr(right_type, REVERSED[dunder], None)
        if isinstance(reflected, types.FunctionType):
            return UserFunctionVariable(reflected).call(tx, [args[1], args[0]], {})
    return None
