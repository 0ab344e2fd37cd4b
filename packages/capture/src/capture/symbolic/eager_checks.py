"""Errors eager raises that fake tensors do not: checked on small real tensors while tracing.

Fake tensors run an op's meta function, which computes the result's shape and dtype but skips some
of the checks of the real kernels: ``bool_tensor.abs()`` (no kernel for bool), ``~float_tensor``,
``torch.empty(0).max()`` (a reduction without identity over no elements). A compiled graph would then
return a value where eager raises. So, for the ops where that can happen, the op also runs once on real
stand-ins of its tensor arguments, and its error (if any) breaks the graph there: the instruction then
runs in Python and raises eager's own error.

* Pointwise ops, reductions and matrix products on bool, integer or complex tensors run on
  one-element tensors of the same dtypes, device and ranks (their dtype support does not depend on
  sizes; CUDA has no integer matrix product, the CPU has).
* Any op whose tensor arguments are all empty runs on real empty tensors of the same sizes (cheap).
* Ops writing a number (`fill_`, `full_like`, `new_full`, `index_fill`, `masked_fill`) run on
  one-element tensors of every dtype: eager refuses a number the dtype cannot hold.
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from capture.variables.base import Unsupported

_OPERATOR_OPS = {operator.abs: "abs", builtins.abs: "abs", operator.invert: "bitwise_not", operator.neg: "neg",
                 operator.pos: "positive", operator.and_: "bitwise_and", operator.or_: "bitwise_or",
                 operator.xor: "bitwise_xor", operator.lshift: "bitwise_left_shift",
                 operator.rshift: "bitwise_right_shift", operator.mod: "remainder", operator.floordiv: "floor_divide",
                 operator.truediv: "div", operator.pow: "pow", operator.add: "add", operator.sub: "sub",
                 operator.mul: "mul", operator.matmul: "matmul"}
_TORCH_MODULES = ("torch", "torch._C._nn", "torch._C._special", "torch._C._linalg", "torch.functional")
_PLAIN_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Ops writing a number into a tensor: eager's kernel refuses one its dtype cannot hold (300 into
# int8, 1e6 into float16), their meta functions do not.
_MATRIX_PRODUCTS = frozenset({"matmul", "mm", "bmm", "addmm", "addmm_", "baddbmm", "baddbmm_", "addbmm", "addbmm_",
                              "addmv", "addmv_", "mv", "dot", "vdot", "inner", "outer", "linear", "__matmul__",
                              "__rmatmul__"})
_NUMBER_WRITES = frozenset({"fill_", "fill", "full_like", "new_full", "index_fill", "index_fill_", "masked_fill",
                            "masked_fill_"})


def _aten_name(kind: str, target: Any) -> str | None:
    """The ATen op a graph node's target runs (by name), or None for targets not checked."""
    if kind == "call_method":
        return target if isinstance(target, str) else None
    if kind != "call_function":
        return None
    try:
        known = _OPERATOR_OPS.get(target)
    except TypeError:
        known = None
    if known is not None:
        return known
    name = getattr(target, "__name__", None)
    if isinstance(target, (type(torch.abs), type(torch.Tensor.abs))) and isinstance(name, str):
        owner = getattr(target, "__objclass__", None)
        if owner is torch._C.TensorBase or getattr(target, "__module__", None) in _TORCH_MODULES:
            return name
    return None


def _tags(name: str) -> set[torch.Tag]:
    """The tags of every overload of ATen op `name` (of its out-of-place form, for `abs_`)."""
    packet = getattr(torch.ops.aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket) and name.endswith("_") and not name.endswith("__"):
        packet = getattr(torch.ops.aten, name[:-1], None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return set()
    tags: set[torch.Tag] = set()
    for overload in packet.overloads():
        tags.update(getattr(packet, overload).tags)
    return tags


@dataclass
class EagerChecks:
    """Runs the real-tensor checks of one trace; each (op, dtypes, ranks, arguments) is checked once."""

    checked: dict[Any, BaseException | None] = field(default_factory=dict)
    # dtypes of the tensors the last checked call returned on real stand-ins (None: not run)
    real_dtypes: dict[Any, list[torch.dtype]] = field(default_factory=dict)
    last_key: Any = None

    def check(self, kind: str, target: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
        """Raise Unsupported (a user error, from eager's exception) when eager raises for this call."""
        self.last_key = None
        name = _aten_name(kind, target)
        if name is None:
            return
        values = [*args, *kwargs.values()]
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        if not tensors or any(_symbolic_or_nested(v) for v in values):
            return
        empty = all(t.numel() == 0 for t in tensors)
        writes_number = name in _NUMBER_WRITES
        if not empty and not writes_number and all(t.dtype in _PLAIN_DTYPES for t in tensors):
            return
        tags = _tags(name)
        if torch.Tag.nondeterministic_seeded in tags:
            return  # a real run would consume the program's random numbers
        if (not empty and not writes_number and name not in _MATRIX_PRODUCTS
                and not tags & {torch.Tag.pointwise, torch.Tag.reduction}):
            return
        key = (kind, name, target if kind == "call_function" else None, empty,
               tuple(_describe(v, empty) for v in args), tuple((k, _describe(v, empty)) for k, v in kwargs.items()))
        try:
            error = self.checked.get(key, _MISSING)
        except TypeError:
            return  # an unhashable argument: not checked
        if error is _MISSING:
            error, dtypes = _run(kind, target, args, kwargs, empty)
            self.checked[key], self.real_dtypes[key] = error, dtypes
        if error is not None:
            raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
        self.last_key = key

    def agree(self, name: str, fake_result: Any) -> None:
        """Raise Unsupported (a graph break) when the last checked call's fake result has other
        dtypes than eager's kernel gives (``bool_tensor ** True`` is bool in eager, int64 in its meta
        function): the compiled code would read a buffer of one dtype as another."""
        real = self.real_dtypes.get(self.last_key) if self.last_key is not None else None
        self.last_key = None
        if real is None:
            return
        fake = [t.dtype for t in _tensors_of(fake_result)]
        if fake != real:
            raise Unsupported(f"{name}: eager's kernel returns {', '.join(map(str, real))} where its fake "
                              f"kernel says {', '.join(map(str, fake))}; the call runs eagerly")


_MISSING: Any = object()


def _symbolic_or_nested(value: Any) -> bool:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(n, torch.SymInt) for n in value.shape)
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, torch.Tensor) or _symbolic_or_nested(v) for v in value)
    return isinstance(value, dict)


def _describe(value: Any, empty: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return (value.dtype, value.device, tuple(value.shape) if empty else value.dim())
    return (type(value), value)


def _stand_in(value: Any, empty: bool, index: bool = False) -> Any:
    """A real tensor like `value`: its own sizes when `empty`, else one element (1, an index: 0)."""
    if not isinstance(value, torch.Tensor):
        return value
    shape = tuple(value.shape) if empty else (1,) * value.dim()
    fill = torch.zeros if index and not empty else torch.ones
    return fill(shape, dtype=value.dtype, device=value.device)


def _tensors_of(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_of(v)]
    return []


def _run(kind: str, target: Any, args: list[Any], kwargs: dict[str, Any],
         empty: bool) -> tuple[BaseException | None, list[torch.dtype]]:
    """The error eager raises on real stand-ins (None: none) and the dtypes of what it returns."""
    # `index_fill`'s index (its third argument) must be valid in a one-element dim: 0, not 1.
    indexed = _aten_name(kind, target) in ("index_fill", "index_fill_")
    real_args = [_stand_in(a, empty, index=indexed and k == 2) for k, a in enumerate(args)]
    real_kwargs = {k: _stand_in(v, empty, index=indexed and k == "index") for k, v in kwargs.items()}
    call: Callable[..., Any] = getattr(real_args[0], target) if kind == "call_method" else target
    if kind == "call_method":
        real_args = real_args[1:]
    try:
        with torch.no_grad():
            result = call(*real_args, **real_kwargs)
    except Exception as error:
        return error, []
    return None, [t.dtype for t in _tensors_of(result)]
