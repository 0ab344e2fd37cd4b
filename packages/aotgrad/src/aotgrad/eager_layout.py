"""Floor division and copysign laid out as eager lays them out, so fake tensors get eager's strides.

torch's fake (and meta) kernels of ``div(..., rounding_mode=...)``, ``floor_divide`` and
``copysign`` are Python references composed of other ops; for operands broadcast from size-1 dims
in other memory orders their result's strides differ from what eager's TensorIterator gives
(``(1, 1, 2)`` where eager's are ``(4, 2, 1)``). A later ``view`` that eager accepts then fails in
the trace, and a graph output keeps the wrong strides (a ``.view(-1)`` after a graph break raises).
Where the strides differ (static sizes only), the op is traced whole and its result copied into a
tensor with eager's strides; elsewhere the op is left as it is (`NotImplemented`).

``pow`` and ``float_power`` of a Python number by a tensor (``2 ** t``) are eager's ``out=`` kernels
writing into a fresh tensor: their result is contiguous whatever the exponent's layout, where the
fake kernels follow the exponent's (a transposed exponent gave a transposed power).

``normal`` with a tensor ``std`` is contiguous in eager where the fake kernel follows ``std``'s
layout, and ``native_dropout_backward`` follows its operands' layout (TensorIterator) where the fake
kernel is contiguous. Batch norm's output is laid out by its input's suggested memory format
(`batch_norm_laid_out_as_eager`): contiguous for every input but a channels-last one, where the fake
kernels and torch's decompositions follow the input's strides; a transposed 3-d input's output then
refused ``.view(-1)``, which eager accepts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch._prims_common import (
    compute_elementwise_output_strides,
    make_channels_last_strides_for,
    make_contiguous_strides_for,
    suggest_memory_format,
)
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq
from torch.utils._python_dispatch import _disable_current_modes

aten = torch.ops.aten

__all__ = ["EAGER_LAYOUT", "batch_norm_laid_out_as_eager"]

_INSIDE = threading.local()  # set while the op itself is traced inside its decomposition


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(n, int) for n in (*t.shape, *t.stride()))


def _meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device="meta")
    return value


def _contiguous(shape: tuple[int, ...], expanded: list[torch.Tensor]) -> tuple[int, ...]:
    return tuple(make_contiguous_strides_for(shape))


def _elementwise(shape: tuple[int, ...], expanded: list[torch.Tensor]) -> tuple[int, ...]:
    return tuple(compute_elementwise_output_strides(*map(_meta, expanded)))


def _with_eager_strides(
    op: torch._ops.OpOverload, layout: Callable[[tuple[int, ...], list[torch.Tensor]], tuple[int, ...]] = _elementwise
) -> Callable[..., Any]:
    def decompose(*args: Any, **kwargs: Any) -> Any:
        if getattr(_INSIDE, "active", False):
            return NotImplemented
        operands = [a for a in args if isinstance(a, torch.Tensor)]
        if not operands or not all(_static(t) for t in operands):
            return NotImplemented
        with _disable_current_modes():
            traced = op(*map(_meta, args), **kwargs)
        shape = tuple(traced.shape)
        expanded = [t.expand(shape) for t in operands if t.dim() > 0 or len(operands) == 1]
        if not expanded:
            return NotImplemented
        with _disable_current_modes():
            eager = layout(shape, expanded)
        if eager == tuple(traced.stride()):
            return NotImplemented
        _INSIDE.active = True
        try:
            result = op(*args, **kwargs)
        finally:
            _INSIDE.active = False
        # `aten.copy` (out of place: a decomposition runs below functionalization) keeps `dst`'s strides.
        return aten.copy.default(torch.empty_strided(shape, eager, dtype=result.dtype, device=result.device), result)

    return decompose


EAGER_LAYOUT: dict[Any, Callable[..., Any]] = {
    op: _with_eager_strides(op) for op in (aten.div.Tensor_mode, aten.floor_divide.default, aten.copysign.Tensor)
}
EAGER_LAYOUT.update({op: _with_eager_strides(op, _contiguous) for op in (aten.pow.Scalar, aten.float_power.Scalar)})
EAGER_LAYOUT[aten.native_dropout_backward.default] = _with_eager_strides(aten.native_dropout_backward.default)

_Strides = Callable[[torch.Tensor, tuple[Any, ...], dict[str, Any]], "tuple[Any, ...] | None"]


def _first_result_laid_out(op: torch._ops.OpOverload, strides_of: _Strides, decomposition: Any = None) -> Callable[..., Any]:
    """`decomposition` of `op` (None, or NotImplemented from it: the op traced whole) with its
    (first) result copied into eager's strides, ``strides_of(result, args, kwargs)`` (None: as it
    is), unless it provably has them already: with symbolic sizes too."""

    def decompose(*args: Any, **kwargs: Any) -> Any:
        if getattr(_INSIDE, "active", False):
            return NotImplemented
        result = NotImplemented if decomposition is None else decomposition(*args, **kwargs)
        if result is NotImplemented:
            _INSIDE.active = True
            try:
                result = op(*args, **kwargs)
            finally:
                _INSIDE.active = False
        out = result[0] if isinstance(result, (tuple, list)) else result
        strides = strides_of(out, args, kwargs) if isinstance(out, torch.Tensor) else None
        if strides is None or statically_known_true(sym_eq(tuple(out.stride()), strides)):
            return result
        # `aten.copy` (out of place: a decomposition runs below functionalization) keeps `dst`'s strides.
        laid_out = aten.copy.default(torch.empty_strided(out.shape, strides, dtype=out.dtype, device=out.device), out)
        if not isinstance(result, (tuple, list)):
            return laid_out
        return [laid_out, *result[1:]] if isinstance(result, list) else (laid_out, *result[1:])

    return decompose


def _contiguous_result(out: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(make_contiguous_strides_for(tuple(out.shape)))


def _batch_norm_strides(out: torch.Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...] | None:
    """The strides of eager's batch-norm output, ``empty_like(x, x.suggest_memory_format())`` for the
    input `x` (contiguous but for a channels-last input; unknown for a symbolic one of 4 or 5 dims)."""
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, torch.Tensor) or x.dim() != out.dim():
        return None
    if x.dim() in (4, 5):
        # With symbolic sizes, decided on the sizes' hints: the memory order of a dynamic input's
        # dims is part of the compiled graph's guards, and decides the suggested format.
        probe = x if _static(x) else _hinted(x)
        if probe is None:
            return None
        if suggest_memory_format(probe) != torch.contiguous_format:
            return tuple(make_channels_last_strides_for(tuple(out.shape)))
    return tuple(make_contiguous_strides_for(tuple(out.shape)))


def _hinted(x: torch.Tensor) -> torch.Tensor | None:
    """A meta tensor with `x`'s sizes and strides at their hints; None where one has none."""
    values = []
    for n in (*x.shape, *x.stride()):
        hint = n if isinstance(n, int) else getattr(n.node, "hint", None)
        if hint is None:
            return None
        values.append(int(hint))
    return torch.empty_strided(values[: x.dim()], values[x.dim() :], dtype=x.dtype, device="meta")


EAGER_LAYOUT.update(
    {op: _first_result_laid_out(op, _contiguous_result) for op in (aten.normal.float_Tensor, aten.normal.Tensor_Tensor)}
)


def batch_norm_laid_out_as_eager(op: torch._ops.OpOverload, decomposition: Any = None) -> Callable[..., Any]:
    """`decomposition` of the batch-norm overload `op` (None, or NotImplemented from it: the op
    whole) with its output copied into eager's layout (`_batch_norm_strides`) where it has another."""
    return _first_result_laid_out(op, _batch_norm_strides, decomposition)
