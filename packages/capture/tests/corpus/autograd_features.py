"""Autograd-facing features inside the region: custom Functions, tensor hooks, checkpointing, vmap, parametrizations."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._registry import args, module, program, x


def _requires_grad(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=True)


F = "autograd_features"


class ScaleGrad(torch.autograd.Function):
    """A custom autograd Function: identity forward, scaled backward."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 0.5


class SquareFn(torch.autograd.Function):
    """A custom autograd Function saving a tensor for backward."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(t)
        return t * t

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (t,) = ctx.saved_tensors
        return 2 * t * grad


@program(F, args(lambda: _requires_grad(4)))
def custom_function_identity(a: torch.Tensor) -> torch.Tensor:
    return (ScaleGrad.apply(a) * 3).detach()


@program(F, x(4))
def custom_function_saved_tensor(a: torch.Tensor) -> torch.Tensor:
    return SquareFn.apply(a.sin()) + 1


@program(F, args(lambda: _requires_grad(4)))
def tensor_register_hook(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    b.register_hook(lambda grad: grad * 3)
    return (b + 1).detach()


@program(F, x(4, 4))
def checkpointed_block(a: torch.Tensor) -> torch.Tensor:
    def block(t: torch.Tensor) -> torch.Tensor:
        return (t @ t).relu()

    return torch.utils.checkpoint.checkpoint(block, a, use_reentrant=False)


@program(F, x(3, 4))
def vmap_over_rows(a: torch.Tensor) -> torch.Tensor:
    return torch.vmap(lambda row: row.dot(row))(a)


@program(F, x(4))
def requires_grad_inside(a: torch.Tensor) -> torch.Tensor:
    b = a.detach().clone().requires_grad_(True)
    return (b * 2).detach()


@program(F, args(lambda: _requires_grad(4)))
def autograd_grad_inside(a: torch.Tensor) -> torch.Tensor:
    y = (a * a).sum()
    (grad,) = torch.autograd.grad(y, a)
    return grad.detach()


@module(F, x(2, 8))
class LinearSubclassSuperForward(nn.Linear):
    """Subclasses nn.Linear and calls super().forward()."""

    def __init__(self) -> None:
        super().__init__(8, 4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return super().forward(a).tanh()


@module(F, x(2, 8))
class WeightNormParametrized(nn.Module):
    """A weight_norm parametrization (the weight is recomputed on every access)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.utils.parametrizations.weight_norm(nn.Linear(8, 4))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc(a)


@module(F, x(2, 8))
class ModuleApplyInInit(nn.Module):
    """Weights initialised with Module.apply, read in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
        self.body.apply(self._init)

    @staticmethod
    def _init(mod: nn.Module) -> None:
        if isinstance(mod, nn.Linear):
            nn.init.constant_(mod.bias, 0.1)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.body(a)


@module(F, x(2, 8))
class DropoutFunctionalEval(nn.Module):
    """F.dropout with training=self.training, in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.eval()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(self.fc(a), p=0.3, training=self.training)


@program(F, args(lambda: _requires_grad(3, 3)))
def backward_inside_region(a: torch.Tensor) -> torch.Tensor:
    leaf = a.detach().clone().requires_grad_(True)
    (leaf * leaf).sum().backward()
    return leaf.grad * 2
