"""Derivatives that the joint trace supplies itself, for ops of the functional forward graph.

The joint graph differentiates the functional forward (`tracing/joint.py`), whose ops autograd
mostly knows. Functionalization, though, turns `dst.copy_(src)` on a tensor that is not an input
into `aten.copy(dst, src)`, an op without a derivative formula ("derivative for aten::copy is not
implemented"): eager differentiates the in-place `copy_` instead. `REPLAY_OVERRIDES` maps such ops
to an autograd.Function computing the same value with the derivative eager's op has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

aten = torch.ops.aten


class _Copy(torch.autograd.Function):
    """`aten.copy(dst, src)` with the derivative of eager's `dst.copy_(src)`: the gradient goes to
    `src` (summed over broadcast dims, cast back to `src`'s dtype); `dst`'s value is overwritten, so
    its gradient is zeros."""

    @staticmethod
    def forward(ctx: Any, dst: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:  # type: ignore[override]
        """The functional copy itself."""
        ctx.src_shape, ctx.src_dtype = src.shape, src.dtype
        return aten.copy.default(dst, src, non_blocking)  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        """Zeros for `dst`, `grad` reduced to `src`'s shape and dtype for `src`."""
        grad_dst = torch.zeros_like(grad) if ctx.needs_input_grad[0] else None
        grad_src = None
        if ctx.needs_input_grad[1]:
            grad_src = grad.real if grad.is_complex() and not ctx.src_dtype.is_complex else grad
            grad_src = grad_src.sum_to_size(ctx.src_shape).to(ctx.src_dtype)
        return grad_dst, grad_src, None


def _copy(dst: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    return _Copy.apply(dst, src, non_blocking)  # type: ignore[no-any-return]


REPLAY_OVERRIDES: dict[Any, Callable[..., Any]] = {aten.copy.default: _copy}
"""ATen overload -> the differentiable callable the joint trace runs in its place."""
