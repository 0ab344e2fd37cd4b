"""The base of variable trackers: symbolic stand-ins for the values on the interpreted stack."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from capture.sources import Source
from capture.variables import upcalls

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


class Unsupported(Exception):
    """Raised by a handler or variable when the trace cannot continue: a graph break.

    `user_error` marks breaks caused by code that raises in eager too (the error is then
    reproduced by running the instruction in plain Python).
    """

    def __init__(self, reason: str, *, user_error: bool = False, resumable: bool = True,
                 exception: BaseException | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.user_error = user_error
        self.resumable = resumable
        self.exception = exception  # the exception eager raises here, when it can be caught in the trace


class VariableTracker:
    """A value seen by the symbolic interpreter.

    `source` says where an existing Python object came from (None for values made in the
    traced region); reconstruction uses it to hand the same object back to Python.
    """

    source: Source | None = None

    def python_type(self) -> type:
        """The Python type the value has at run time."""
        raise Unsupported(f"type of {self} is unknown")

    def is_constant(self) -> bool:
        """True when the value is a known Python constant."""
        return False

    def as_constant(self) -> Any:
        """The Python constant (raises Unsupported for non-constants)."""
        raise Unsupported(f"{self} is not a Python constant")

    def truth(self, tx: Tracer) -> bool:
        """`bool(value)` at trace time, or a graph break when it depends on data."""
        raise Unsupported(f"truth value of {self} depends on run-time data")

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        """`value.name`."""
        raise Unsupported(f"attribute {name!r} of {self}")

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """`value(*args, **kwargs)`."""
        raise Unsupported(f"call to {self}")

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        """The items `iter(value)` yields, when known at trace time."""
        raise Unsupported(f"iteration over {self}")

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


class ConstantVariable(VariableTracker):
    """A Python constant: None, bool, int, float, str, dtype, device, range, slice, ..."""

    def __init__(self, value: Any, source: Source | None = None) -> None:
        self.value = value
        self.source = source

    def python_type(self) -> type:
        return type(self.value)

    def is_constant(self) -> bool:
        return True

    def as_constant(self) -> Any:
        return self.value

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        try:
            attribute = getattr(self.value, name)
        except AttributeError as error:
            raise Unsupported(str(error), user_error=True) from error
        return upcalls.wrap_constant_attribute(attribute)

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        if isinstance(self.value, (range, tuple, list, str, bytes, frozenset, set)):
            return [ConstantVariable(item) for item in self.value]
        raise Unsupported(f"iteration over constant {self.value!r}")

    def __repr__(self) -> str:
        return f"ConstantVariable({self.value!r})"


class NullVariable(VariableTracker):
    """The NULL that CALL's calling convention puts below a plain callable."""

    def __repr__(self) -> str:
        return "NULL"


def is_constant_value(value: object) -> bool:
    """True for values tracked as `ConstantVariable`."""
    import types

    import torch

    simple = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.layout,
              torch.memory_format, range, slice, type(Ellipsis), type(NotImplemented), torch.Size, types.CodeType)
    if isinstance(value, simple):
        return True
    numpy = sys.modules.get("numpy")  # numpy scalars (`np.sqrt(4.0)`) are constants; not imported: none exist
    if numpy is not None and isinstance(value, (numpy.number, numpy.bool_)):
        return True
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset) and \
            all(is_constant_value(v) for v in value):
        return True
    return False


def class_attribute(cls: type, name: str) -> Any:
    """`name` as found on `cls` or its bases (no descriptor binding), or None."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


class ExceptionVariable(VariableTracker):
    """An exception object raised (and maybe caught) inside the traced region."""

    def __init__(self, value: BaseException) -> None:
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        if name == "args" and all(is_constant_value(a) for a in self.value.args):
            return ConstantVariable(tuple(self.value.args))
        raise Unsupported(f"attribute {name!r} of an exception")

    def __repr__(self) -> str:
        return f"ExceptionVariable({self.value!r})"


def wrapped_class(variable: VariableTracker) -> type | None:
    """The class a variable stands for, or None (``super``'s first argument, or ``__class__``'s
    cell: a module class is wrapped as a torch callable, a plain one as a Python object)."""
    for attribute in ("value", "fn"):
        candidate = getattr(variable, attribute, None)
        if isinstance(candidate, type):
            return candidate
    return None


def numpy_scalar(value: Any) -> bool:
    """True for a numpy scalar (`np.float64(2.0)`, `np.int32(3)`, `np.bool_(True)`)."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.generic) and \
        isinstance(value, (numpy.number, numpy.bool_))


def graph_constant(value: Any) -> Any:
    """A constant as a graph argument: numpy scalars become the Python numbers they hold (the graph's
    generated code cannot name numpy), inside tuples, lists, dicts and slices too."""
    if numpy_scalar(value):
        return value.item()
    if type(value) in (tuple, list):
        return type(value)(graph_constant(item) for item in value)
    if type(value) is dict:
        return {key: graph_constant(item) for key, item in value.items()}
    if type(value) is slice:
        return slice(graph_constant(value.start), graph_constant(value.stop), graph_constant(value.step))
    return value


class DeferredAttributeVariable(VariableTracker):
    """An attribute capture cannot model: any use of it is a graph break (at the use, not the read)."""

    def __init__(self, owner: VariableTracker, name: str, error: Unsupported) -> None:
        self.owner = owner
        self.name = name
        self.error = error

    def _fail(self) -> Unsupported:
        return Unsupported(self.error.reason, user_error=self.error.user_error, resumable=self.error.resumable)

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        raise self._fail()

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        raise self._fail()

    def truth(self, tx: Tracer) -> bool:
        raise self._fail()

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        raise self._fail()

    def __repr__(self) -> str:
        return f"DeferredAttributeVariable({self.owner}.{self.name})"


class RunTimeValueVariable(VariableTracker):
    """A string known only at run time (what a break formatted from tensor data, ``f"{loss.item():.4f}"``), reaching a
    resume function: passed along and rebuilt from its source, never guarded by value; any other use is a graph
    break there (as a constant it would recompile the resume function on every call)."""

    def __init__(self, value_type: type, source: Source) -> None:
        self.value_type = value_type
        self.source = source

    def python_type(self) -> type:
        return self.value_type

    def reconstruct(self, rebuild: Any) -> str:
        """The value itself, read from the resume function's argument."""
        assert self.source is not None
        return self.source.expr()

    def __repr__(self) -> str:
        return f"RunTimeValueVariable({self.value_type.__name__} at {self.source})"
