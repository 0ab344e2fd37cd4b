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

``pow`` and ``float_power`` of a Python number by a tensor (``2 ** t``) are eager's ``out=`` kernels
writing into a fresh tensor: contiguous whatever the exponent's layout, where the fake kernels
follow the exponent's (a transposed exponent gave a transposed power: ``.view(-1)`` refused).

Three ops that are not elementwise differ too (`_whole_op_strides`): batch norm (functional and
modules) is laid out by its input's suggested memory format (contiguous, or channels-last for a
channels-last input) where the fake kernel follows the input's strides; ``torch.normal`` is
contiguous where the fake kernel follows ``std``'s; ``native_dropout_backward`` follows its
operands' strides as eager's TensorIterator does where the fake kernel is contiguous.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch._prims_common import (
    compute_elementwise_output_strides,
    make_channels_last_strides_for,
    make_contiguous_strides_for,
    suggest_memory_format,
)

_FUNCTIONS = frozenset({torch.floor_divide, torch.copysign, operator.floordiv})
_METHODS = frozenset({"floor_divide", "copysign", "__floordiv__", "__rfloordiv__"})


def _restrided_op(kind: str, target: Any, kwargs: dict[str, Any]) -> bool:
    if kind == "call_function":
        return target in _FUNCTIONS or (target is torch.div and kwargs.get("rounding_mode") is not None)
    if kind == "call_method":
        return target in _METHODS or (target == "div" and kwargs.get("rounding_mode") is not None)
    return False


def _power_of_a_number(kind: str, target: Any, args: list[Any]) -> bool:
    """``2 ** t``, ``torch.pow(2, t)``, ``torch.float_power(2, t)``: a number base, a tensor exponent."""
    if kind == "call_function" and target in (operator.pow, torch.pow, torch.float_power):
        return len(args) >= 2 and not isinstance(args[0], torch.Tensor) and isinstance(args[1], torch.Tensor)
    if kind == "call_method" and target == "__rpow__":
        return len(args) >= 2 and isinstance(args[0], torch.Tensor) and not isinstance(args[1], torch.Tensor)
    return False


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(n, int) for n in (*t.shape, *t.stride()))


_BATCH_NORMS = frozenset({torch.nn.functional.batch_norm, torch.batch_norm})
_DROPOUT_BACKWARD = frozenset({torch.ops.aten.native_dropout_backward, torch.ops.aten.native_dropout_backward.default})


def _whole_op_strides(kind: str, target: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[int, ...] | None:
    """Eager's strides for the result of batch norm, ``normal`` or ``native_dropout_backward``
    (`target` of a ``call_module`` is the module); None for other ops."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    batch_norm = target in _BATCH_NORMS if kind == "call_function" else (
        kind == "call_module" and isinstance(target, torch.nn.modules.batchnorm._BatchNorm)
    )
    if batch_norm and isinstance(first, torch.Tensor) and _static(first):
        shape = tuple(first.shape)
        memory_format = suggest_memory_format(first)
        if memory_format == torch.contiguous_format:
            return tuple(make_contiguous_strides_for(shape))
        return tuple(make_channels_last_strides_for(shape))
    if kind == "call_function" and target is torch.normal:
        return ()  # contiguous, whatever the shape
    if kind == "call_function" and target in _DROPOUT_BACKWARD:
        operands = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if len(operands) == 2 and all(_static(t) for t in operands):
            return tuple(compute_elementwise_output_strides(*operands))
    return None


def with_eager_strides(kind: str, target: Any, args: list[Any], kwargs: dict[str, Any], result: Any) -> Any:
    """`result` (a fake op's), restrided as eager's kernel would lay it out, where it differs.
    `target` of a ``call_module`` is the module itself."""
    whole = _whole_op_strides(kind, target, args, kwargs)
    if whole is not None and isinstance(result, torch.Tensor) and _static(result):
        shape = tuple(result.shape)
        strides = whole or tuple(make_contiguous_strides_for(shape))
        if len(strides) != len(shape) or strides == tuple(result.stride()):
            return result
        return torch.empty_strided(shape, strides, dtype=result.dtype, device=result.device)
    if isinstance(result, torch.Tensor) and _power_of_a_number(kind, target, args):
        if not _static(result) or result.is_contiguous():
            return result
        shape = tuple(result.shape)
        return torch.empty_strided(shape, make_contiguous_strides_for(shape), dtype=result.dtype, device=result.device)
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
