"""Library calls answered at trace time or redirected to what they do: numpy on Python numbers
(`ndarray.NumpyCallVariable`), `importlib.util.find_spec`, functions marked constant for the process, and
tensor methods called through the class (`torch.Tensor.__radd__(x, 2)`).

`folded_callable(value)` is consulted by `library.library_callable` when an existing value is wrapped; it
returns the tracker for such a callable, or None.
"""

from __future__ import annotations

import importlib.util
import operator
import sys
import types
from typing import TYPE_CHECKING, Any

import torch

from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker, is_constant_value
from capture.variables.containers import (
    DictVariable,
    ListVariable,
    TupleVariable,
    is_plain_value,
    plain_value,
)
from capture.variables.functional import PartialVariable
from capture.variables.functions import BoundMethodVariable, NestedFunctionVariable, UserFunctionVariable
from capture.variables.ndarray import NumpyCallVariable, folds_at_trace_time, numpy_function_path
from capture.variables.objects import NNModuleVariable, PythonObjectVariable, SkippedFunctionVariable
from capture.variables.pytree import PytreeFunctionVariable, SpecUnflattenVariable
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

# Tensor methods reached through the class whose meaning is a Python operator with swapped operands.
_REFLECTED = {"__radd__": operator.add, "__rmul__": operator.mul, "__rand__": operator.and_,
              "__ror__": operator.or_, "__rxor__": operator.xor}


def folded_callable(value: Any) -> VariableTracker | None:
    """The tracker of a callable this module handles, or None."""
    if value is importlib.util.find_spec:
        return FindSpecVariable()
    if _marked_constant(value):
        return ConstantResultVariable(value)
    if isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)) and \
            getattr(value, "__objclass__", None) is torch._C.TensorBase:
        return TensorDescriptorVariable(value)
    if _is_numpy_random(value):
        name = getattr(value, "__qualname__", getattr(value, "__name__", "?"))
        return SkippedFunctionVariable(value, f"numpy.random ({name}) draws at run time: it runs eagerly, not as a "
                                              "constant of the graph")
    if _is_numpy_callable(value):
        return NumpyCallVariable(value)
    return None


def _is_numpy_random(value: Any) -> bool:
    """np.random's functions and the methods of its generators (`np.random.rand`, `RandomState(0).normal`);
    its classes stay classes (`isinstance(r, np.random.RandomState)`)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or isinstance(value, type):
        return False
    try:
        module = getattr(value, "__module__", None) or ""
    except Exception:
        return False
    return isinstance(module, str) and (module == "numpy.random" or module.startswith("numpy.random."))


def _marked_constant(value: Any) -> bool:
    """True for a function its library marks as answering the same for the whole process (transformers'
    `is_<package>_available()`): the marker `assume_constant_result` sets, on it or under its `lru_cache`."""
    try:
        return getattr(value, "_dynamo_marked_constant", False) is True or \
            getattr(getattr(value, "__wrapped__", None), "_dynamo_marked_constant", False) is True
    except Exception:  # an object whose __getattr__ raises something other than AttributeError
        return False


class ConstantResultVariable(VariableTracker):
    """A function marked as constant for the process (`_marked_constant`): called once at trace time, on
    constant arguments, its result a constant of the graph (not guarded, as the mark promises)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        name = getattr(self.fn, "__qualname__", self.fn)
        if not all(is_plain_value(v) for v in [*args, *kwargs.values()]):
            raise Unsupported(f"call to {name} (marked constant) with traced arguments")
        try:
            result = self.fn(*[plain_value(a) for a in args], **{k: plain_value(v) for k, v in kwargs.items()})
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        if not is_constant_value(result):
            raise Unsupported(f"{name} (marked constant) returned a {type(result).__name__}")
        return ConstantVariable(result)

    def reconstruct(self, rebuild: Any) -> str:
        """The real function."""
        return str(rebuild.constant(self.fn))

    def __repr__(self) -> str:
        return f"ConstantResultVariable({getattr(self.fn, '__qualname__', self.fn)})"


def _is_numpy_callable(value: Any) -> bool:
    numpy = sys.modules.get("numpy")  # not imported: the value cannot be one of its functions
    if numpy is None:
        return False
    if folds_at_trace_time(numpy, value):
        return True
    return numpy_function_path(value) is not None  # traced through torch._numpy (variables/ndarray.py)


class FindSpecVariable(VariableTracker):
    """`importlib.util.find_spec(name)` (`is_<package>_available()` checks): looked up once, at trace time.

    Not guarded: which packages are installed does not change while a program runs in the ways that
    matter here (libraries such as transformers cache these answers for the whole process too).
    """

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if not all(v.is_constant() for v in [*args, *kwargs.values()]):
            raise Unsupported("importlib.util.find_spec with non-constant arguments")
        try:
            spec = importlib.util.find_spec(*[a.as_constant() for a in args],
                                            **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as error:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        if spec is None:
            return ConstantVariable(None)
        tx.output.keepalive.append(spec)
        return PythonObjectVariable(spec, None)

    def reconstruct(self, rebuild: Any) -> str:
        """The real `find_spec`."""
        return str(rebuild.constant(importlib.util.find_spec))


class TensorDescriptorVariable(VariableTracker):
    """A tensor method read from the class and called with the tensor first: `torch.Tensor.__radd__(x, 2)`,
    `torch.Tensor.cfloat(x)`. Traced as the method call (or the operator) it stands for."""

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor

    def python_type(self) -> type:
        return type(self.descriptor)

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        name = self.descriptor.__name__
        if not args or not isinstance(args[0], TensorVariable):
            raise Unsupported(f"torch.Tensor.{name} called on {args[0] if args else 'nothing'}")
        if name in _REFLECTED and len(args) == 2 and not kwargs:
            return tx.apply_operator(_REFLECTED[name], [args[1], args[0]])
        if name == "__getitem__" and len(args) == 2 and not kwargs:
            return tx.apply_operator(operator.getitem, args)
        return tx.get_attribute(args[0], name).call(tx, list(args[1:]), kwargs)

    def reconstruct(self, rebuild: Any) -> str:
        """The real descriptor."""
        return str(rebuild.constant(self.descriptor))

    def __repr__(self) -> str:
        return f"TensorDescriptorVariable({self.descriptor.__qualname__})"


@upcalls.has_opaque_argument.provide
def has_opaque_argument(values: list[VariableTracker]) -> bool:
    """True when some value cannot be an argument of a graph node: a module, a user object, a function.

    A Python function of torch called with one (`nn.LayerNorm.forward(self, x)`, a loss given an
    `nn.PairwiseDistance()` as its distance, an options dataclass) is traced through instead.
    """
    opaque = (NNModuleVariable, PythonObjectVariable, UserFunctionVariable, NestedFunctionVariable, BoundMethodVariable,
              PartialVariable, PytreeFunctionVariable, SpecUnflattenVariable)
    for value in values:
        if isinstance(value, opaque):
            return True
        if isinstance(value, (TupleVariable, ListVariable)) and has_opaque_argument(list(value.items)):
            return True
        if isinstance(value, DictVariable) and has_opaque_argument(list(value.items.values())):
            return True
    return False
