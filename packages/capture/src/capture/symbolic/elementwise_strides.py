"""Result strides of the elementwise ops whose fake kernels disagree with eager's.

Fake tensors take Python references for ``div(..., rounding_mode=...)``, ``floor_divide`` (``a // b``)
and ``copysign``, written as compositions of other ops; for operands broadcast from size-1 dims
in other memory orders (a permuted ``(1, 1, 2)`` beside a ``(1, 2, 1)``), the composition ends with
other strides than eager's TensorIterator gives (``(1, 1, 2)`` where eager's are ``(4, 2, 1)``).
Later code that depends on the layout then differs: a ``.view(-1)`` that eager accepts is refused,
in the trace or after a graph break. With static sizes such a result is given the strides
TensorIterator's rule gives (`torch._prims_common.compute_elementwise_output_strides` over the
broadcast operands); with symbolic sizes it is left as it is. (aotgrad's trace does the same for
the graph it compiles: `aotgrad.eager_layout`.)
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch._prims_common import compute_elementwise_output_strides

_FUNCTIONS = frozenset({torch.floor_divide, torch.copysign, operator.floordiv})
_METHODS = frozenset({"floor_divide", "copysign", "__floordiv__", "__rfloordiv__"})


def _restrided_op(kind: str, target: Any, kwargs: dict[str, Any]) -> bool:
    if kind == "call_function":
        return target in _FUNCTIONS or (target is torch.div and kwargs.get("rounding_mode") is not None)
    if kind == "call_method":
        return target in _METHODS or (target == "div" and kwargs.get("rounding_mode") is not None)
    return False


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(n, int) for n in (*t.shape, *t.stride()))


def with_eager_strides(kind: str, target: Any, args: list[Any], kwargs: dict[str, Any], result: Any) -> Any:
    """`result` (a fake op's), restrided as eager's kernel would lay it out, where it differs."""
    if not (isinstance(result, torch.Tensor) and _restrided_op(kind, target, kwargs)):
        return result
    operands = [a for a in args if isinstance(a, torch.Tensor)]
    if not operands or not all(_static(t) for t in (*operands, result)):
        return result
    shape = tuple(result.shape)
    # A 0-d tensor beside others does not take part in the layout (TensorIterator's CPU scalars).
    expanded = [t.expand(shape) for t in operands if t.dim() > 0 or len(operands) == 1]
    if not expanded:
        return result
    strides = tuple(compute_elementwise_output_strides(*expanded))
    if strides == tuple(result.stride()):
        return result
    return torch.empty_strided(shape, strides, dtype=result.dtype, device=result.device)
