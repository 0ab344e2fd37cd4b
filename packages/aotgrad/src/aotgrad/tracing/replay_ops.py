"""Derivatives that the joint trace supplies itself, for ops of the functional forward graph.

The joint graph differentiates the functional forward (`tracing/joint.py`), whose ops autograd
mostly knows. Functionalization, though, turns `dst.copy_(src)` on a tensor that is not an input
into `aten.copy(dst, src)`, an op without a derivative formula ("derivative for aten::copy is not
implemented"): eager differentiates the in-place `copy_` instead. And some formulas branch on the
data in eager but not on fake tensors: `prod`'s gradient is `grad * result / input` in eager when
no input is zero (NaN where an input is inf or NaN), a zero-safe product of the others otherwise
(and, for the product of all elements outside create_graph, zeros where two or more are zero);
traced on fake tensors autograd always takes the zero-safe one (finite there). `REPLAY_OVERRIDES`
maps such ops to an autograd.Function computing the same value with eager's derivative. A double
backward replays the forward on real values (`runtime/higher_order.py`): there `prod` is autograd's
own, whose branch is eager's at every order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._subclasses.fake_tensor import is_fake

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


class _Prod(torch.autograd.Function):
    """`aten.prod` (`dim` None: all of it) with eager's data-dependent derivative, both branches
    computed and the one eager takes selected: `grad * result / input` when no element of the
    input is zero, else the zero-safe formula (autograd's own, as traced); for the product of all
    elements, zeros where two or more elements are zero (outside create_graph)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int | None, keepdim: bool, dtype: torch.dtype | None) -> torch.Tensor:  # type: ignore[override]
        """The product itself."""
        ctx.dim, ctx.keepdim, ctx.dtype = dim, keepdim, dtype
        result = aten.prod.default(x, dtype=dtype) if dim is None else aten.prod.dim_int(x, dim, keepdim, dtype=dtype)
        ctx.save_for_backward(x, result)
        return result  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        """Eager's branch of the derivative, chosen by whether any input element is zero."""
        x, result = ctx.saved_tensors
        if x.dim() == 0:
            return grad.to(x.dtype), None, None, None
        create_graph = torch.is_grad_enabled()
        with torch.enable_grad():
            # Under create_graph the zero-safe gradient stays a function of `x`, for the next backward.
            leaf = x if create_graph and x.requires_grad else x.detach().requires_grad_()
            redo = _prod(leaf, ctx.dim, ctx.keepdim, ctx.dtype, differentiable=False)
            (safe,) = torch.autograd.grad(redo, leaf, grad, create_graph=create_graph)
        if ctx.dim is not None and not ctx.keepdim:
            grad, result = grad.unsqueeze(ctx.dim), result.unsqueeze(ctx.dim)
        # Taken only where no element is zero: dividing by 1 there keeps a second derivative of the
        # branch not taken finite (0 * nan would reach the gradient through `where`).
        simple = grad * (result / torch.where(x == 0, 1, x)).conj()
        chosen = torch.where((x == 0).any(), safe, simple.to(safe.dtype))
        if ctx.dim is None and not create_graph:
            # Eager's product of all elements, outside create_graph: with two zeros or more every
            # element's gradient is 0 (the zero-safe formula gives NaN there for an inf or NaN input).
            chosen = torch.where((x == 0).sum() > 1, 0.0, chosen)
        return chosen, None, None, None


def _data_is_known(x: torch.Tensor) -> bool:
    """Whether `x` holds real values (a double backward's replay), not fake ones (the joint trace)."""
    return x.device.type != "meta" and not is_fake(x)


def _prod(
    x: torch.Tensor, dim: int | None = None, keepdim: bool = False, dtype: torch.dtype | None = None, *, differentiable: bool = True
) -> torch.Tensor:
    # On real values autograd's own derivative takes eager's branch, at every order: `_Prod`'s
    # selection by `where` would leak the branch not taken into a second derivative (0 * NaN).
    if differentiable and x.requires_grad and torch.is_grad_enabled() and not _data_is_known(x):
        return _Prod.apply(x, dim, keepdim, dtype)  # type: ignore[no-any-return]
    return aten.prod.default(x, dtype=dtype) if dim is None else aten.prod.dim_int(x, dim, keepdim, dtype=dtype)  # type: ignore[no-any-return]


def _prod_all(x: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    return _prod(x, dtype=dtype)


REPLAY_OVERRIDES: dict[Any, Callable[..., Any]] = {
    aten.copy.default: _copy,
    aten.prod.default: _prod_all,
    aten.prod.dim_int: _prod,
}
"""ATen overload -> the differentiable callable the joint trace runs in its place."""
