"""torch.no_grad, enable_grad, set_grad_enabled, inference_mode and torch.autocast regions."""

from __future__ import annotations

import torch

from ._registry import args, program, randn, x, xy

F = "grad_modes"


def _requires_grad(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=True)


@program(F, x(4))
def no_grad_block(a: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        b = a * 2
    return b + 1


@program(F, args(lambda: _requires_grad(4)))
def no_grad_on_requires_grad(a: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        stat = a.mean()
    return (a - stat).detach()


@program(F, args(lambda: _requires_grad(4)))
def enable_grad_inside_no_grad(a: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        b = a * 2
        with torch.enable_grad():
            c = a * 3
    return (b + c).detach()


@program(F, x(4))
def set_grad_enabled_false(a: torch.Tensor) -> torch.Tensor:
    with torch.set_grad_enabled(False):
        return a.sin() * 2


@program(F, args(lambda: _requires_grad(4)))
def is_grad_enabled_branch(a: torch.Tensor) -> torch.Tensor:
    if torch.is_grad_enabled():
        return (a * 2).detach()
    return a.detach()


@program(F, x(4))
def no_grad_decorated_helper(a: torch.Tensor) -> torch.Tensor:
    return _no_grad_helper(a) + 1


@torch.no_grad()
def _no_grad_helper(t: torch.Tensor) -> torch.Tensor:
    return t * t


@program(F, xy((8, 8)))
def autocast_cpu_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = a @ b
    return c.float() + 1


@program(F, xy((8, 8)))
def autocast_disabled(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", enabled=False):
        return (a @ b).relu()


@program(F, xy((8, 8)))
def autocast_nested_disable(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = a @ b
        with torch.autocast("cpu", enabled=False):
            d = c.float() @ b
    return d


@program(F, args(lambda: _requires_grad(4)))
def detach_and_requires_grad_checks(a: torch.Tensor) -> torch.Tensor:
    d = a.detach()
    return d * 2 if not d.requires_grad else d


@program(F, args(lambda: _requires_grad(3, 3)))
def grad_flowing_output(a: torch.Tensor) -> torch.Tensor:
    return (a.exp() * a).sum(-1)


@program(F, args(lambda: _requires_grad(4), lambda: randn(4)))
def mixed_requires_grad_inputs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b + b).tanh()


@program(F, x(4))
def inference_mode_block(a: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        b = a * 3
    return b.clone() + 1
