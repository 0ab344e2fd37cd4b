"""What NumPy itself gives (dtype, shape, scalar or array), so traced NumPy code returns that where torch._numpy
differs.

torch._numpy follows NumPy in most places but not all: `int_array / 2` and `np.arctan2` on integers give
torch's float32 there, NumPy's float64; `np.fft.*` on float32 gives complex128 there, complex64 in NumPy 2;
`np.median(a)` gives a 1-element array there, a scalar in NumPy. `expected_results` runs the real NumPy call once
at trace time on arrays of ones with the operands' shapes and dtypes (values do not decide these; symbolic
sizes at their current values, large elementwise operands as one element per dim), and `as_numpy_gives` then computes in the expected dtype (integer operands cast first, so `7 / 2` is
exact) or casts the result, reshapes a one-element result, and breaks the graph on any other difference.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.builtins import BuiltinVariable
from capture.variables.containers import ListVariable, TupleVariable
from capture.variables.ndarray import (
    NdarrayVariable,
    NumpyCallVariable,
    as_ndarray_trackers,
    numpy_dtype,
    torch_dtype,
)
from capture.variables.sym_values import SymNodeVariable
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

# Operands with more elements than this are simulated with one element per dim (ufuncs and operators) or not
# at all (the check is skipped: torch._numpy's result stands).
_MAX_ELEMENTS = 1 << 20


class _NoStandIn(Exception):
    """An argument NumPy cannot be shown at trace time (a symbolic size, a traced Python number, ...)."""


@dataclass(frozen=True)
class Expected:
    """One array (or numpy scalar) a NumPy call returns: its dtype, shape, and whether it is a scalar."""

    dtype: Any
    shape: tuple[int, ...] | None  # None: not known exactly (simulated on other sizes)
    scalar: bool


def expected_results(real: Callable[..., Any], args: list[VariableTracker],
                     kwargs: dict[str, VariableTracker]) -> list[Expected] | None:
    """What `real(*args, **kwargs)` returns in NumPy, array by array; None when the call cannot be simulated or
    fails on ones (e.g. `np.linalg.inv` of a singular matrix). Symbolic sizes are simulated at their current
    values, and large elementwise operands (ufuncs, operators) as one element per dim; shapes are then not
    compared (`Expected.shape` is None)."""
    import numpy

    stand = _StandIns(shrink=False)
    try:
        stand_ins = [stand(a) for a in args]
        keywords = {k: stand(v) for k, v in kwargs.items()}
    except _TooLarge:
        if not (isinstance(real, numpy.ufunc) or getattr(real, "__module__", None) in ("_operator", "operator")):
            return None
        stand = _StandIns(shrink=True)
        try:
            stand_ins = [stand(a) for a in args]
            keywords = {k: stand(v) for k, v in kwargs.items()}
        except _NoStandIn:
            return None
    except _NoStandIn:
        return None
    with numpy.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = real(*stand_ins, **keywords)
        except Exception:
            return None
    leaves = list(result) if isinstance(result, (tuple, list)) else [result]
    if not all(isinstance(leaf, (numpy.ndarray, numpy.generic)) for leaf in leaves):
        return None
    return [Expected(leaf.dtype, None if stand.approximate else tuple(leaf.shape), isinstance(leaf, numpy.generic))
            for leaf in leaves]


@upcalls.as_numpy_gives.provide
def as_numpy_gives(tx: Tracer, result: VariableTracker, real: Callable[..., Any],
                   args: list[VariableTracker], kwargs: dict[str, VariableTracker],
                   again: Callable[[list[VariableTracker]], VariableTracker],
                   graph_args: list[VariableTracker]) -> VariableTracker:
    """`result` (ndarray trackers of a traced NumPy call) made to match what NumPy gives for the same call.

    `again(graph_args)` records the call once more with other operands (integer operands cast to the expected
    floating dtype)."""
    expected = expected_results(real, args, kwargs)
    leaves = list(result.items) if isinstance(result, (TupleVariable, ListVariable)) else [result]
    arrays = [leaf for leaf in leaves if isinstance(leaf, NdarrayVariable)]
    if expected is None or len(expected) != len(leaves) or len(arrays) != len(leaves):
        return result
    wanted = [torch_dtype(item.dtype) for item in expected]
    if len(arrays) == 1 and arrays[0].tensor.example.dtype != wanted[0] and wanted[0] is not None and \
            (wanted[0].is_floating_point or wanted[0].is_complex):
        recomputed = _with_integer_operands_cast(tx, again, graph_args, wanted[0])
        if recomputed is not None:
            if not arrays[0].tensor.node.users:
                tx.output.graph.erase_node(arrays[0].tensor.node)
            arrays = [as_ndarray_trackers(recomputed, False)]  # type: ignore[list-item]
    fixed: list[VariableTracker] = []
    for leaf, item, dtype in zip(arrays, expected, wanted):
        tensor = leaf.tensor
        shape = tuple(tensor.example.shape)
        if item.shape is not None and all(isinstance(n, int) for n in shape) and shape != item.shape:
            if tensor.example.numel() != 1 or len(item.shape) > 1:  # only `(1,)` where NumPy gives `()`
                raise Unsupported(f"torch._numpy gives shape {list(shape)} where NumPy gives {list(item.shape)} "
                                  f"({getattr(real, '__name__', real)}): not captured")
            tensor = _call(tx, "reshape", tensor, ConstantVariable(item.shape))
        if tensor.example.dtype != dtype:
            tensor = _call(tx, "to", tensor, ConstantVariable(dtype))
        fixed.append(leaf if tensor is leaf.tensor and leaf.scalar == item.scalar else
                     NdarrayVariable(tensor, scalar=item.scalar))
    if isinstance(result, TupleVariable):
        return TupleVariable(fixed)
    return ListVariable(fixed) if isinstance(result, ListVariable) else fixed[0]


def _call(tx: Tracer, method: str, tensor: TensorVariable, arg: VariableTracker) -> TensorVariable:
    out = tx.output.call_graph("call_method", method, [tensor, arg], {})
    assert isinstance(out, TensorVariable)
    return out


def _with_integer_operands_cast(tx: Tracer, again: Callable[[list[VariableTracker]], VariableTracker],
                                graph_args: list[VariableTracker], dtype: torch.dtype) -> VariableTracker | None:
    """The call again with its integer and bool array operands cast to `dtype` first (`int_array / 2` computed
    in float64, as NumPy does), or None when that does not give `dtype`."""
    def cast(value: VariableTracker) -> VariableTracker:
        if isinstance(value, TensorVariable) and not (value.example.is_floating_point() or value.example.is_complex()):
            return _call(tx, "to", value, ConstantVariable(dtype))
        return value

    cast_args = [cast(a) for a in graph_args]
    if all(a is b for a, b in zip(cast_args, graph_args)):
        return None
    try:
        recomputed = again(cast_args)
    except Unsupported:
        return None
    if isinstance(recomputed, TensorVariable) and recomputed.example.dtype == dtype:
        return recomputed
    return None


class _TooLarge(_NoStandIn):
    """An operand too large to simulate at its size."""


class _StandIns:
    """Stand-ins NumPy is called with: arrays of ones of the operands' dtypes and shapes, the constants as
    written. `shrink` gives arrays one element per dim; `approximate` says whether a size was not exact."""

    def __init__(self, shrink: bool) -> None:
        self.shrink = shrink
        self.approximate = shrink

    def __call__(self, value: VariableTracker) -> Any:
        import numpy

        if isinstance(value, (NdarrayVariable, TensorVariable)):
            example = value.tensor.example if isinstance(value, NdarrayVariable) else value.example
            if example.dtype not in _KNOWN:
                raise _NoStandIn()
            dtype = numpy_dtype(example.dtype)
            if isinstance(value, NdarrayVariable) and value.scalar:
                return dtype.type(1)
            shape = tuple(1 if self.shrink else self._size(n) for n in example.shape)
            if math.prod(shape) > _MAX_ELEMENTS:
                raise _TooLarge()
            return numpy.ones(shape, dtype)
        if isinstance(value, SymNodeVariable):
            return self._size(value.value)
        if isinstance(value, ConstantVariable):
            if isinstance(value.value, (torch.dtype, torch.device)):
                raise _NoStandIn()
            return value.value
        if isinstance(value, NumpyCallVariable) and isinstance(value.fn, type):
            return value.fn
        if isinstance(value, BuiltinVariable) and value.fn in (float, int, bool, complex):
            return value.fn
        if isinstance(value, (TupleVariable, ListVariable)):
            items = [self(item) for item in value.items]
            return tuple(items) if isinstance(value, TupleVariable) else items
        raise _NoStandIn()

    def _size(self, size: Any) -> Any:
        """A static size, or a symbolic one's current value (read without a guard)."""
        if isinstance(size, (int, float, bool)):
            return size
        hint = getattr(getattr(size, "node", None), "hint", None)
        if hint is None:  # a size only the data gives
            raise _NoStandIn()
        self.approximate = True
        return hint


_KNOWN = {torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.int8, torch.int16,
          torch.int32, torch.int64, torch.uint8, torch.bool}
