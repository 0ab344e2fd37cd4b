"""NumPy code traced as tensor code: ndarrays in the region are tensors of the graph with NumPy's semantics.

`Tensor.numpy()`, `np.asarray(tensor)` and ndarray arguments give an `NdarrayVariable`: a traced tensor whose
attributes, methods and operators follow NumPy (type promotion with float64 defaults, `axis=`, `a.T`, ...).
Each NumPy operation is one graph node calling `torch._numpy` (NumPy's API implemented on tensors) on the
tensors as ndarrays (`numpy_function`, `numpy_method`, `numpy_operator`, `numpy_attribute`); `torch.from_numpy`
turns the value back into a tensor. An ndarray the region hands back to Python (returned, or live at a graph
break) is rebuilt as a real numpy array from the graph's output tensor (`ndarray_from_tensor`). Writes
(`a[i] = v`, `a += 1`) are nodes writing into the tensor, so memory shared with a tensor sees them as in eager;
write methods (`a.sort()`) and calls that leave the graph (`a.tolist()`) break the graph. Results are made to
match what NumPy itself gives (dtype, shape, scalar or array) by `numpy_results.py`. A numpy ufunc, scalar type or
pure function called on Python numbers is evaluated at trace time instead (`NumpyCallVariable`).
"""

from __future__ import annotations

import math
import operator
import sys
import types
import warnings
from typing import TYPE_CHECKING, Any

import torch

from capture.sources import PureCallSource
from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker, is_constant_value
from capture.variables.builtins import BuiltinVariable
from capture.variables.common import BINARY_OPERATORS, INPLACE_OPERATORS
from capture.variables.containers import (
    DictVariable,
    ListVariable,
    TupleVariable,
    is_plain_value,
    plain_value,
)
from capture.variables.objects import PythonObjectVariable
from capture.variables.sym_values import SymNodeVariable, call_builtin
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from types import ModuleType

    from capture.variables.tracer import Tracer

# numpy's namespaces traced through torch._numpy (np.random is not: its draws are not a function of the inputs).
_NAMESPACES = {"numpy": "", "numpy.linalg": "linalg.", "numpy.fft": "fft."}
# Results that stay 0-d arrays (not numpy scalars) when they have no dims, as in NumPy (used where NumPy's own
# answer is not simulated, see numpy_results.py).
_ARRAY_RESULTS = frozenset({"array", "asarray", "asanyarray", "ascontiguousarray", "copy", "empty", "zeros", "ones",
                            "full", "empty_like", "zeros_like", "ones_like", "full_like", "reshape", "astype",
                            "view", "squeeze", "transpose", "ravel", "flatten"})
# ndarray methods that write into the array (its memory may be a tensor's) or leave the graph.
_WRITING_METHODS = frozenset({"sort", "fill", "resize", "put", "itemset", "partition", "setfield", "setflags",
                              "byteswap"})
_LEAVING_METHODS = frozenset({"tolist", "item", "tobytes", "tostring", "tofile", "dump", "dumps", "__array__",
                              "__dlpack__", "__float__", "__int__", "__bool__", "__index__"})
# Pure numpy functions (besides ufuncs and scalar types) folded when their arguments are Python constants.
# Anything else numpy offers (np.random, file I/O, np.seterr, array constructors) is left a graph break.
_PURE_NUMPY_FUNCTIONS = frozenset({
    "prod", "sum", "mean", "amax", "amin", "max", "min", "round", "around", "clip", "isscalar", "ndim",
    "iscomplexobj", "isrealobj", "result_type", "promote_types", "can_cast",
})
_METADATA = frozenset({"ndim", "size", "itemsize", "nbytes", "dtype", "shape"})
_VIEWS = frozenset({"T", "real", "imag", "mT"})


def _tnp() -> ModuleType:
    """`torch._numpy`, with NumPy's default dtypes (float64, complex128, int64) set before its first use
    (left unset, it would read them from a compiler's configuration)."""
    import torch._numpy._dtypes_impl as impl

    if impl._default_dtypes is None:
        impl._default_dtypes = impl.DefaultDTypes(  # type: ignore[assignment]
            float_dtype=torch.float64, complex_dtype=torch.complex128, int_dtype=torch.int64)
    import torch._numpy as tnp

    return tnp


def _resolve(path: str) -> Any:
    found: Any = _tnp()
    for part in path.split("."):
        found = getattr(found, part, None)
    return found


def _as_ndarrays(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return _tnp().ndarray(value)
    if type(value) in (tuple, list):
        return type(value)(_as_ndarrays(item) for item in value)
    if type(value) is dict:
        return {key: _as_ndarrays(item) for key, item in value.items()}
    return value


def _as_tensors(value: Any) -> Any:
    tnp = _tnp()
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if type(value) in (tuple, list):
        return type(value)(_as_tensors(item) for item in value)
    return value


# --- graph targets ---------------------------------------------------------------------------------------


def numpy_function(path: str, *args: Any, **kwargs: Any) -> Any:
    """Graph target: `torch._numpy.<path>(*args, **kwargs)` (`path` as `"sum"`, `"linalg.norm"`), tensors
    given as ndarrays and ndarray results returned as tensors."""
    return _as_tensors(_resolve(path)(*_as_ndarrays(args), **_as_ndarrays(kwargs)))


def numpy_method(name: str, array: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """Graph target: the ndarray method `name` of `array` (`a.sum(axis=0)`, `a.astype(...)`)."""
    return _as_tensors(getattr(_tnp().ndarray(array), name)(*_as_ndarrays(args), **_as_ndarrays(kwargs)))


def numpy_attribute(name: str, array: torch.Tensor) -> Any:
    """Graph target: the ndarray attribute `name` of `array` (`a.T`, `a.real`)."""
    return _as_tensors(getattr(_tnp().ndarray(array), name))


def numpy_operator(name: str, *args: Any) -> Any:
    """Graph target: the Python operator `operator.<name>` on ndarrays (`a + 1`, `a[1:, None]`, `-a`)."""
    return _as_tensors(getattr(operator, name)(*_as_ndarrays(args)))


def ndarray_from_tensor(tensor: torch.Tensor, scalar: bool) -> Any:
    """The numpy value an ndarray of the region is at run time: the array over the graph's output tensor (a
    numpy scalar when NumPy gives one, for `scalar`)."""
    array = tensor.numpy(force=True)
    return array[()] if scalar else array


# --- trackers ----------------------------------------------------------------------------------------------


class NdarrayVariable(VariableTracker):
    """A numpy ndarray (or numpy scalar, for `scalar`) of the region: the traced tensor holding its values.

    `source` is set for an existing array read from Python (an argument, a global): returned, it is that object.
    """

    def __init__(self, tensor: TensorVariable, *, scalar: bool = False, source: Any = None) -> None:
        self.tensor = tensor
        self.scalar = scalar
        self.source = source

    def python_type(self) -> type:
        numpy = _numpy()
        python_type: type = numpy_dtype(self.tensor.example.dtype).type if self.scalar else numpy.ndarray
        return python_type

    def truth(self, tx: Tracer) -> bool:
        raise Unsupported("data-dependent control flow: the branch depends on a NumPy value computed in the graph")

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        example = self.tensor.example
        if name in _METADATA:
            if name == "shape":
                return TupleVariable([tx.output.tensor_metadata(self.tensor, "size", d) for d in range(example.dim())])
            if name == "size":
                return tx.output.tensor_metadata(self.tensor, "numel")
            if name == "ndim":
                return ConstantVariable(example.dim())
            if name == "dtype":
                return ConstantVariable(numpy_dtype(example.dtype))
            itemsize = example.element_size()
            if name == "itemsize":
                return ConstantVariable(itemsize)
            return apply_size(tx, tx.output.tensor_metadata(self.tensor, "numel"), itemsize)
        if name in _VIEWS:
            return _traced(tx, numpy_attribute, [ConstantVariable(name), self.tensor], {}, array=not self.scalar)
        if name == "__class__":
            return tx.output.wrap_value(self.python_type(), None)
        cls = self.python_type()
        if callable(getattr(cls, name, None)):
            return NdarrayMethodVariable(self, name)
        if hasattr(cls, name):
            raise Unsupported(f"{cls.__name__}.{name} is not captured (numpy values are traced as tensors)")
        message = f"'numpy.{cls.__name__}' object has no attribute '{name}'"
        raise Unsupported(f"AttributeError: {message}", user_error=True, exception=AttributeError(message))

    def iterate(self, tx: Tracer) -> list[VariableTracker]:
        if self.tensor.example.dim() == 0:
            raise Unsupported("TypeError: iteration over a 0-d array", user_error=True)
        return [ndarray_operator(tx, operator.getitem, [self, ConstantVariable(i)])
                for i in range(int(self.tensor.example.shape[0]))]

    def reconstruct(self, rebuild: Any) -> str:
        """The same array for an existing one, else a numpy array over the graph's output tensor."""
        if self.source is not None:
            return str(self.source.expr())
        return f"{rebuild.constant(ndarray_from_tensor)}({rebuild.expr(self.tensor)}, {self.scalar})"

    def __repr__(self) -> str:
        return f"numpy {'scalar' if self.scalar else 'ndarray'} ({self.tensor.node.name})"


class NdarrayMethodVariable(VariableTracker):
    """A bound method of a traced ndarray, e.g. `a.sum`."""

    def __init__(self, array: NdarrayVariable, name: str) -> None:
        self.array = array
        self.name = name

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        name = self.name
        if name in _WRITING_METHODS:
            raise Unsupported(f"ndarray.{name}() writes into the array (its memory may be a tensor's): not captured")
        if name in _LEAVING_METHODS:
            raise Unsupported(f"ndarray.{name}() converts a NumPy array computed in the graph to Python values")
        if not callable(getattr(_tnp().ndarray, name, None)):
            raise Unsupported(f"ndarray.{name}() is not captured (torch._numpy does not implement it)")
        if name == "astype" and not args and "dtype" not in kwargs:
            raise Unsupported("TypeError: astype() missing required argument 'dtype'", user_error=True)
        arguments = [_graph_argument(tx, a) for a in args]
        keywords = {k: _graph_argument(tx, v) for k, v in kwargs.items()}
        return _traced(tx, numpy_method, [ConstantVariable(name), self.array.tensor, *arguments], keywords,
                       array=name in _ARRAY_RESULTS, real=lambda a, *xs, **kw: getattr(a, name)(*xs, **kw),
                       args=[self.array, *args], kwargs=kwargs)

    def __repr__(self) -> str:
        return f"ndarray method {self.name}"


def folds_at_trace_time(numpy: Any, value: Any) -> bool:
    """Numpy callables safe to run at trace time on constants: ufuncs, scalar types, dtype/finfo/iinfo and the
    pure functions above (others, such as array constructors, are traced)."""
    if isinstance(value, numpy.ufunc):
        return True
    if isinstance(value, type):
        return (issubclass(value, numpy.generic) and value.__module__ == "numpy") or \
            value in (numpy.dtype, numpy.finfo, numpy.iinfo)
    return isinstance(value, types.FunctionType) and value.__name__ in _PURE_NUMPY_FUNCTIONS and \
        getattr(numpy, value.__name__, None) is value


class NumpyCallVariable(VariableTracker):
    """A numpy ufunc, scalar type or pure function: evaluated at trace time on Python constants.

    `np.sqrt(self.d_model)`, `np.log(float(scale))`, `np.float32(0.5)`: the result (a numpy scalar,
    kept as one, as eager has it) is a constant of the trace; the arguments were guarded where they
    were read. On a symbolic size, a ufunc that `math` also has is traced as the `math` function.
    """

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def is_constant(self) -> bool:
        return isinstance(self.fn, type)  # a scalar type or dtype class: `a.dtype == np.float32`

    def as_constant(self) -> Any:
        return self.fn if isinstance(self.fn, type) else super().as_constant()

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        values = [*args, *kwargs.values()]
        name = getattr(self.fn, "__name__", "")
        numpy = sys.modules["numpy"]
        if all(is_plain_value(v) for v in values) and folds_at_trace_time(numpy, self.fn):
            try:
                result = self.fn(*[plain_value(a) for a in args], **{k: plain_value(v) for k, v in kwargs.items()})
            except Exception as error:
                raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
            if is_constant_value(result) or is_numpy_constant(result):
                return ConstantVariable(result)
            if not isinstance(result, numpy.ndarray):
                raise Unsupported(f"numpy.{name} returned a {type(result).__name__}")
        if any(isinstance(v, SymNodeVariable) for v in values) and hasattr(math, name):
            symbolic = call_builtin(tx, getattr(math, name), args, kwargs)
            if symbolic is not None:
                return symbolic
        return call_numpy_function(tx, self.fn, args, kwargs)  # traced as tensor code

    def reconstruct(self, rebuild: Any) -> str:
        """The real numpy callable."""
        return str(rebuild.constant(self.fn))

    def __repr__(self) -> str:
        return f"NumpyCallVariable({getattr(self.fn, '__name__', self.fn)})"


# --- entry points from other trackers ------------------------------------------------------------------------


def tensor_to_ndarray(tx: Tracer, tensor: TensorVariable, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker], what: str = "Tensor.numpy()") -> NdarrayVariable:
    """`tensor.numpy()` (also `np.asarray(tensor)`): the same tensor as an ndarray, with eager's errors."""
    force = bool(kwargs["force"].as_constant()) if "force" in kwargs else \
        bool(args[0].as_constant()) if args else False
    example = tensor.example
    if force and (example.requires_grad or example.device.type != "cpu"):
        tensor = tx.output.call_graph("call_method", "detach", [tensor], {})  # type: ignore[assignment]
        if example.device.type != "cpu":
            tensor = tx.output.call_graph("call_method", "cpu", [tensor], {})  # type: ignore[assignment]
        example = tensor.example
    if example.requires_grad:
        raise Unsupported(f"RuntimeError: {what} on a tensor that requires grad", user_error=True)
    if example.device.type != "cpu":
        raise Unsupported(f"TypeError: {what} on a {example.device.type} tensor", user_error=True)
    if example.dtype not in _NUMPY_DTYPES:
        raise Unsupported(f"TypeError: {what} on a {example.dtype} tensor (numpy has no such dtype)", user_error=True)
    if example.is_conj() or example.is_neg():
        raise Unsupported(f"RuntimeError: {what} on a tensor with its conjugate or negative bit set", user_error=True)
    return NdarrayVariable(tensor)


def ndarray_operator(tx: Tracer, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """A Python operator with an ndarray operand, with NumPy's semantics."""
    if fn in INPLACE_OPERATORS:
        if not isinstance(args[0], NdarrayVariable):  # `total += array` rebinds `total`
            return ndarray_operator(tx, BINARY_OPERATORS[INPLACE_OPERATORS.index(fn)], args)
        return _written(tx, args[0], fn.__name__, args[1:])
    if fn is operator.contains:
        raise Unsupported("`in` on a NumPy array depends on run-time data")
    tensors = [a for a in args if isinstance(a, TensorVariable)]
    if tensors:
        return _mixed_operator(tx, fn, args)
    operands = [_graph_argument(tx, a) for a in args]
    return _traced(tx, numpy_operator, [ConstantVariable(fn.__name__), *operands], {},
                   array=fn is operator.getitem and _keeps_array(args), real=fn, args=args, kwargs={})


def ndarray_setitem(tx: Tracer, array: NdarrayVariable, index: VariableTracker,
                    value: VariableTracker) -> None:
    """`a[index] = value`: written into the array's tensor in the graph (a tensor sharing its memory, such as
    the one `a = t.numpy()` came from, sees the write, as in eager)."""
    _written(tx, array, "setitem", [index, value])


def _written(tx: Tracer, array: NdarrayVariable, name: str, operands: list[VariableTracker]) -> \
        NdarrayVariable:
    """An in-place operator (`a += b`, `a[i] = v`) as a graph node that writes into `array`'s tensor."""
    if any(isinstance(a, TensorVariable) for a in operands):
        raise Unsupported(f"in-place {name} of a NumPy array with a torch.Tensor operand is not captured")
    before = array.tensor
    result = tx.output.call_graph("call_function", numpy_operator,
                                  [ConstantVariable(name), before, *[_graph_argument(tx, a) for a in operands]], {})
    if name != "setitem":
        if not isinstance(result, TensorVariable) or result.example is not before.example:
            raise Unsupported(f"in-place {name} on a NumPy array did not write into it")
        array.tensor = result  # later uses follow the write
    return array


def call_numpy_function(tx: Tracer, fn: Any, args: list[VariableTracker],
                        kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`np.<name>(...)` (also `np.linalg.*`, `np.fft.*`) on traced values or making arrays: one graph node."""
    path = numpy_function_path(fn)
    if path is None:
        raise Unsupported(f"numpy.{getattr(fn, '__name__', fn)} is not captured (torch._numpy does not implement it)")
    name = path.rsplit(".", 1)[-1]
    if name in ("asarray", "array", "asanyarray") and len(args) == 1 and isinstance(args[0], TensorVariable) \
            and not kwargs and name != "array":
        return tensor_to_ndarray(tx, args[0], [], {}, f"numpy.{name}(tensor)")
    if name in ("array", "asarray") and len(args) == 1 and set(kwargs) <= {"dtype"} and \
            isinstance(args[0], (TupleVariable, ListVariable)) and args[0].items and \
            all(isinstance(item, (NdarrayVariable, TensorVariable)) for item in args[0].items):
        numpy = _numpy()  # `np.array([a, b])` of arrays is their stack (same shapes; NumPy raises otherwise)
        stacked = call_numpy_function(tx, numpy.stack, [args[0]], {})
        if "dtype" not in kwargs:
            return stacked
        return NdarrayMethodVariable(stacked, "astype").call(tx, [kwargs["dtype"]], {})  # type: ignore[arg-type]
    arguments = [_graph_argument(tx, a) for a in args]
    keywords = {k: _graph_argument(tx, v) for k, v in kwargs.items()}
    return _traced(tx, numpy_function, [ConstantVariable(path), *arguments], keywords, array=name in _ARRAY_RESULTS,
                   real=fn, args=args, kwargs=kwargs)


def torch_from_ndarray(tx: Tracer, fn: Any, args: list[VariableTracker],
                       kwargs: dict[str, VariableTracker]) -> VariableTracker:
    """`torch.from_numpy(a)`, `torch.as_tensor(a)`, `torch.tensor(a)`, `torch.asarray(a)` of a traced ndarray."""
    array = args[0]
    assert isinstance(array, NdarrayVariable)
    if fn is torch.from_numpy:
        if array.scalar or len(args) != 1 or kwargs:
            raise Unsupported("TypeError: torch.from_numpy() expects one np.ndarray", user_error=True)
        return array.tensor
    if fn in (torch.as_tensor, torch.asarray):
        return tx.output.call_graph("call_function", fn, [array.tensor, *args[1:]], kwargs)
    if fn is torch.tensor and len(args) == 1 and set(kwargs) <= {"dtype"}:
        copy = tx.output.call_graph("call_method", "clone", [array.tensor], {})
        return tx.output.call_graph("call_method", "to", [copy], kwargs) if kwargs else copy
    raise Unsupported(f"a NumPy array passed to {getattr(fn, '__name__', fn)} (convert it with torch.from_numpy)")


@upcalls.torch_from_ndarray.provide
def _torch_from_traced_ndarray(tx: Tracer, fn: Any, args: list[VariableTracker],
                               kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """`torch_from_ndarray` when the first argument is a traced ndarray, else None."""
    return torch_from_ndarray(tx, fn, args, kwargs) if isinstance(args[0], NdarrayVariable) else None


@upcalls.ndarray_abs.provide
def _ndarray_abs(tx: Tracer, args: list[VariableTracker]) -> VariableTracker | None:
    """`abs(a)` of a traced ndarray (NumPy's `operator.abs`), else None."""
    return ndarray_operator(tx, operator.abs, args) if isinstance(args[0], NdarrayVariable) else None


upcalls.tensor_to_ndarray.provide(tensor_to_ndarray)


def wrap_ndarray_input(output: Any, value: Any, source: Any) -> VariableTracker:
    """An existing ndarray (argument, global, attribute): a graph input holding its values, guarded like a
    tensor (type, dtype, shape, strides) through `torch.as_tensor(source)`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tensor = torch.as_tensor(value)
    except Exception:  # negative strides, object or string dtypes: numpy keeps it
        tensor = None
    writeable = bool(value.flags.writeable)  # a read-only array stays numpy's (writes must raise)
    if tensor is None or source is None or tensor.dtype not in _NUMPY_DTYPES or not writeable:
        if source is not None and not source.guard_free:
            output.guards.type_is(source, value)
        return PythonObjectVariable(value, source)
    if not source.guard_free:
        output.guards.type_is(source, value)
        output.guards.add("NDARRAY_WRITEABLE", source, f"{source.expr()}.flags.writeable",
                          f"{source.expr()} is a writeable array")
    as_tensor = PureCallSource(source, output.guards.constant(torch), "as_tensor", ())
    output.keepalive.append(tensor)
    return NdarrayVariable(output.add_input(tensor, as_tensor), source=source)


# --- helpers --------------------------------------------------------------------------------------------------


def _numpy() -> Any:
    import numpy

    return numpy


_NUMPY_DTYPES = {torch.float16: "float16", torch.float32: "float32", torch.float64: "float64",
                 torch.complex64: "complex64", torch.complex128: "complex128", torch.int8: "int8",
                 torch.int16: "int16", torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8",
                 torch.bool: "bool"}


def numpy_dtype(dtype: torch.dtype) -> Any:
    """The numpy dtype of a torch dtype."""
    return _numpy().dtype(_NUMPY_DTYPES[dtype])


def torch_dtype(value: Any) -> torch.dtype | None:
    """The torch dtype a numpy dtype argument names (`np.float32`, `np.dtype("int64")`, `float`), or None."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    if not (isinstance(value, numpy.dtype) or (isinstance(value, type) and issubclass(value, numpy.generic))
            or value in (float, int, bool, complex)):
        return None
    name = numpy.dtype(value).name
    for dtype, known in _NUMPY_DTYPES.items():
        if known == name:
            return dtype
    raise Unsupported(f"numpy dtype {name} has no torch counterpart")


def is_numpy_constant(value: Any) -> bool:
    """True for numpy's immutable descriptions of types: `np.dtype(...)`, `np.finfo(...)`, `np.iinfo(...)`."""
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, (numpy.dtype, numpy.finfo, numpy.iinfo))


def numpy_function_path(fn: Any) -> str | None:
    """`"sum"`, `"linalg.norm"` or `"fft.fft"` for a numpy function torch._numpy implements, else None."""
    numpy = sys.modules.get("numpy")
    module, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
    if numpy is None or module not in _NAMESPACES or not isinstance(name, str):
        return None
    owner = numpy if module == "numpy" else getattr(numpy, module.split(".")[1], None)
    try:
        if getattr(owner, name, None) is not fn:
            return None
    except Exception:
        return None
    path = _NAMESPACES[module] + name
    return path if callable(_resolve(path)) else None


def _graph_argument(tx: Tracer, value: VariableTracker) -> VariableTracker:
    """An argument of a NumPy node: ndarrays as their tensors, numpy dtypes as torch dtypes."""
    if isinstance(value, NdarrayVariable):
        return value.tensor
    if isinstance(value, TensorVariable):  # numpy reads a tensor through __array__: eager's checks apply
        return tensor_to_ndarray(tx, value, [], {}, "a numpy function").tensor
    if isinstance(value, ConstantVariable) or isinstance(value, NumpyCallVariable) or \
            isinstance(value, BuiltinVariable):
        raw = value.value if isinstance(value, ConstantVariable) else getattr(value, "fn", None)
        dtype = torch_dtype(raw)
        if dtype is not None:
            return ConstantVariable(dtype)
        return value
    if isinstance(value, (TupleVariable, ListVariable)):
        items = [_graph_argument(tx, item) for item in value.items]
        return TupleVariable(items) if isinstance(value, TupleVariable) else ListVariable(items)
    if isinstance(value, DictVariable):
        return DictVariable({k: _graph_argument(tx, v) for k, v in value.items.items()})
    return value


def _traced(tx: Tracer, target: Any, graph_args: list[VariableTracker],
            graph_kwargs: dict[str, VariableTracker], *, array: bool, real: Any = None,
            args: list[VariableTracker] | None = None, kwargs: dict[str, VariableTracker] | None = None
            ) -> VariableTracker:
    """Record one NumPy node; tensors it returns are ndarrays (numpy scalars when 0-d, unless `array`). With
    `real` (the NumPy callable, called with `args` and `kwargs` as the program wrote them), results get the
    dtypes, shapes and scalar-ness NumPy gives (numpy_results.py)."""
    result = as_ndarray_trackers(tx.output.call_graph("call_function", target, graph_args, graph_kwargs), array)
    if real is None:
        return result
    return upcalls.as_numpy_gives(tx, result, real, args or [], kwargs or {},
                          lambda cast_args: tx.output.call_graph("call_function", target, cast_args, graph_kwargs),
                          graph_args)


def as_ndarray_trackers(value: VariableTracker, array: bool) -> VariableTracker:
    """Tensors of a NumPy node's result as ndarrays (numpy scalars when 0-d, unless `array`)."""
    if isinstance(value, TensorVariable):
        return NdarrayVariable(value, scalar=not array and value.example.dim() == 0)
    if isinstance(value, TupleVariable) and value.cls is None:
        return TupleVariable([as_ndarray_trackers(item, array) for item in value.items])
    if isinstance(value, ListVariable):
        return ListVariable([as_ndarray_trackers(item, array) for item in value.items])
    return value


def _keeps_array(args: list[VariableTracker]) -> bool:
    """`a[...]`-style indexing of a 0-d array keeps an array; integer indexing gives a scalar."""
    index = args[1]
    return index.is_constant() and index.as_constant() is Ellipsis


def _mixed_operator(tx: Tracer, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """An operator between a torch tensor and a numpy scalar: torch's rules apply (the scalar is a Python
    number to torch), traced where that matches the scalar as a 0-d tensor (same or lower dtype category)."""
    tensor = next(a for a in args if isinstance(a, TensorVariable))
    scalar = next(a for a in args if isinstance(a, NdarrayVariable))
    if not scalar.scalar or fn is operator.getitem:
        raise Unsupported("an operator between a NumPy array and a torch.Tensor is not captured "
                          "(convert with torch.from_numpy or Tensor.numpy())")
    if _category(scalar.tensor.example.dtype) > _category(tensor.example.dtype):
        raise Unsupported("an operator between a torch.Tensor and a numpy scalar of a higher dtype category")
    return tx.output.call_graph("call_function", fn,
                                [a.tensor if isinstance(a, NdarrayVariable) else a for a in args], {})


def _category(dtype: torch.dtype) -> int:
    if dtype is torch.bool:
        return 0
    if dtype.is_complex:
        return 3
    return 2 if dtype.is_floating_point else 1


def apply_size(tx: Tracer, numel: VariableTracker, itemsize: int) -> VariableTracker:
    """`numel * itemsize` (`a.nbytes`), symbolic when the size is."""
    return tx.apply_operator(operator.mul, [numel, ConstantVariable(itemsize)])
