"""Decompositions of activation gradients that give eager's values at NaN.

torch's Core ATen decompositions of these backward ops test the *outside* of a region
(``x <= min | x >= max``: zero), where eager's CPU kernels (their vectorized loops, which compute
all but the last few elements of a tensor) test the *inside* (``x > min & x < max``: the
gradient). The two agree everywhere except at NaN, where every comparison is false: the
decompositions passed the incoming gradient through a NaN input where eager gives 0
(``hardtanh``, ``relu6``) or NaN (``elu``, ``selu``, ``celu``, ``hardswish``, ``smooth_l1_loss``).
Each function here is the decomposition with its comparison turned around, the same values
elsewhere bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten

__all__ = ["EAGER_GRADIENTS"]


def hardtanh_backward(grad: torch.Tensor, x: torch.Tensor, min_val: float, max_val: float) -> torch.Tensor:
    """The gradient inside (min_val, max_val), else 0; NaN gives 0."""
    return torch.where((x > min_val) & (x < max_val), grad, 0.0)


def elu_backward(
    grad: torch.Tensor, alpha: float, scale: float, input_scale: float, is_result: bool, x: torch.Tensor
) -> torch.Tensor:
    """``scale * grad`` where x > 0, else the negative branch's gradient (NaN for a NaN x)."""
    negcoef = alpha * scale
    if is_result:
        negative = grad * input_scale * (x + negcoef)
    else:
        negative = grad * input_scale * negcoef * torch.exp(x * input_scale)
    return torch.where(x > 0, grad * scale, negative)


def hardswish_backward(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """0 up to -3, the gradient from 3 up, ``grad * (x / 3 + 0.5)`` between (and at NaN)."""
    middle = torch.where(x >= 3, grad, grad * ((x / 3) + 0.5))
    return torch.where(x <= -3, 0.0, middle)


def smooth_l1_loss_backward(
    grad: torch.Tensor, x: torch.Tensor, target: torch.Tensor, reduction: int, beta: float
) -> torch.Tensor:
    """``grad * sign(d)`` where |d| >= beta, else ``grad * d / beta`` (NaN for a NaN d)."""
    norm = 1.0 / x.numel() if reduction == 1 else 1.0  # 1: Reduction.MEAN
    d = x - target
    scaled = norm * grad
    return torch.where(torch.abs(d) >= beta, scaled * torch.sign(d), scaled * d / beta)


EAGER_GRADIENTS: dict[Any, Callable[..., Any]] = {
    aten.hardtanh_backward.default: hardtanh_backward,
    aten.elu_backward.default: elu_backward,
    aten.hardswish_backward.default: hardswish_backward,
    aten.smooth_l1_loss_backward.default: smooth_l1_loss_backward,
}
