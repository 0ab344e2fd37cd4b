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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch
from torch._prims_common import compute_elementwise_output_strides, make_contiguous_strides_for
from torch.utils._python_dispatch import _disable_current_modes

aten = torch.ops.aten

__all__ = ["EAGER_LAYOUT"]

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
