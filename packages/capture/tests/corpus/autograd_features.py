"""Autograd-facing features inside the region: custom Functions, tensor hooks, checkpointing, vmap, parametrizations."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._registry import args, module, program, x, xy


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


class ClampGrad(torch.autograd.Function):
    """Two inputs, a non-tensor argument, saved tensors and a None gradient."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor, w: torch.Tensor, limit: float) -> torch.Tensor:
        ctx.save_for_backward(t, w)
        ctx.limit = limit
        return t * w

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        t, w = ctx.saved_tensors
        return (grad * w).clamp(-ctx.limit, ctx.limit), grad * t, None


class SplitFn(torch.autograd.Function):
    """Two outputs."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return t.exp(), t.sin()

    @staticmethod
    def backward(ctx: Any, g1: torch.Tensor, g2: torch.Tensor) -> torch.Tensor:
        return g1 + g2


class StraightThrough(torch.autograd.Function):
    """Rounding forward, identity backward (a straight-through estimator)."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t.round()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad


@program(F, args(lambda: _requires_grad(4), lambda: _requires_grad(4)))
def custom_function_two_inputs_and_constant(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ClampGrad.apply(a * 2, b, 0.1) + 1


@program(F, args(lambda: _requires_grad(3, 4)))
def custom_function_two_outputs(a: torch.Tensor) -> torch.Tensor:
    e, s = SplitFn.apply(a)
    return (e * s).sum(1)


@program(F, args(lambda: _requires_grad(6)))
def straight_through_estimator(a: torch.Tensor) -> torch.Tensor:
    return StraightThrough.apply(a * 4) / 4 + a.tanh()


@module(F, args(lambda: torch.randn(2, 4)))
class CustomFunctionInModule(nn.Module):
    """A custom Function applied to a Linear's output; gradients reach the parameters through its backward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return SquareFn.apply(self.fc(a)).mean(0)


@program(F, args(lambda: _requires_grad(4)))
def register_hook_on_input(a: torch.Tensor) -> torch.Tensor:
    a.register_hook(lambda grad: grad * 2)
    return a.sin() + a.cos()


@program(F, args(lambda: _requires_grad(4)))
def register_hook_after_use(a: torch.Tensor) -> torch.Tensor:
    b = a.exp()
    c = b * 3
    b.register_hook(lambda grad: grad.clamp(-1, 1))
    return c + b


@program(F, args(lambda: _requires_grad(4)))
def register_hook_closure_constant(a: torch.Tensor) -> torch.Tensor:
    scale = 0.25

    def hook(grad: torch.Tensor) -> torch.Tensor:
        return grad * scale

    b = a * a
    b.register_hook(hook)
    return b.sum(0, keepdim=True) + 1


@program(F, x(4, 4))
def checkpoint_with_extra_args(a: torch.Tensor) -> torch.Tensor:
    def block(t: torch.Tensor, scale: float, *, shift: float) -> torch.Tensor:
        return (t * scale).sigmoid() + shift

    return torch.utils.checkpoint.checkpoint(block, a, 2.0, shift=1.0, use_reentrant=False)


@module(F, x(2, 8))
class CheckpointedLayers(nn.Module):
    """Activation checkpointing of submodules, as large models do."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(3))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            a = torch.utils.checkpoint.checkpoint(layer, a, use_reentrant=False).relu()
        return a


@program(F, args(lambda: _requires_grad(4, 4)))
def checkpoint_two_outputs(a: torch.Tensor) -> torch.Tensor:
    def block(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return t.tanh(), t @ t

    first, second = torch.utils.checkpoint.checkpoint(block, a, use_reentrant=False)
    return first + second


@program(F, xy((3, 4), (4,)))
def vmap_with_in_dims(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.vmap(torch.dot, in_dims=(0, None))(a, b)


@program(F, x(5, 3))
def func_grad_of_function(a: torch.Tensor) -> torch.Tensor:
    return torch.vmap(torch.func.grad(lambda row: (row.sin() ** 2).sum()))(a)


@program(F, x(3))
def func_jacrev_matrix(a: torch.Tensor) -> torch.Tensor:
    return torch.func.jacrev(lambda t: t.exp() * t.sum())(a)


@module(F, x(2, 4))
class ReentrantCheckpointOfModule(nn.Module):
    """The reentrant checkpoint (use_reentrant=True): its output does not require grad when no input does,
    even though the module has parameters (so inlining it would change what requires grad)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        b = a * 2
        return torch.utils.checkpoint.checkpoint(self.fc, b, use_reentrant=True) + 1
