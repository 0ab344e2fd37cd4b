"""isinstance, hasattr, getattr, setattr, type(), callable() and friends inside the traced region."""

from __future__ import annotations

from typing import Any

import torch

from ._registry import args, program, randn, x

F = "reflection"


class Holder:
    """A bag of attributes."""

    def __init__(self) -> None:
        self.scale = 2.0


@program(F, x(4))
def isinstance_tensor(a: torch.Tensor) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a + 1
    return a


@program(F, args(lambda: randn(4), lambda: 3))
def isinstance_int_argument(a: torch.Tensor, k: Any) -> torch.Tensor:
    if isinstance(k, int):
        return a * k
    return a


@program(F, args(lambda: [randn(3), randn(3)]))
def isinstance_tuple_of_types(items: Any) -> torch.Tensor:
    if isinstance(items, (list, tuple)):
        return torch.stack(list(items)).sum(0)
    return items


@program(F, x(4))
def isinstance_user_class(a: torch.Tensor) -> torch.Tensor:
    h = Holder()
    return a * h.scale if isinstance(h, Holder) else a


@program(F, x(4))
def hasattr_checks(a: torch.Tensor) -> torch.Tensor:
    h = Holder()
    out = a
    if hasattr(h, "scale"):
        out = out * h.scale
    if hasattr(h, "missing"):
        out = out + 100
    return out


@program(F, x(4))
def getattr_with_default(a: torch.Tensor) -> torch.Tensor:
    h = Holder()
    return a * getattr(h, "scale", 1.0) + getattr(h, "bias", 0.5)


@program(F, x(4))
def setattr_then_read(a: torch.Tensor) -> torch.Tensor:
    h = Holder()
    setattr(h, "bias", a.mean())  # noqa: B010
    return a - h.bias


@program(F, x(4))
def delattr_then_hasattr(a: torch.Tensor) -> torch.Tensor:
    h = Holder()
    delattr(h, "scale")
    return a if hasattr(h, "scale") else a * 5


@program(F, x(4))
def type_comparison(a: torch.Tensor) -> torch.Tensor:
    if type(a) is torch.Tensor:
        return a.abs()
    return a


@program(F, x(4))
def callable_builtin(a: torch.Tensor) -> torch.Tensor:
    fn = torch.sin
    return fn(a) if callable(fn) else a


@program(F, x(4, 2))
def tensor_attributes(a: torch.Tensor) -> torch.Tensor:
    out = a.float() if a.dtype == torch.float32 else a
    if a.device.type == "cpu" and not a.requires_grad:
        out = out + 1
    return out * a.ndim


@program(F, x(4))
def is_floating_point_branch(a: torch.Tensor) -> torch.Tensor:
    if a.is_floating_point() and a.is_contiguous():
        return a.exp()
    return a


@program(F, args(lambda: randn(4), lambda: None))
def none_argument_check(a: torch.Tensor, mask: Any) -> torch.Tensor:
    if mask is None:
        return a * 2
    return a * mask


@program(F, x(4))
def issubclass_check(a: torch.Tensor) -> torch.Tensor:
    if issubclass(torch.nn.Linear, torch.nn.Module):
        return a + 3
    return a


@program(F, x(4))
def vars_of_instance(a: torch.Tensor) -> torch.Tensor:
    h = Holder()
    return a * len(vars(h))
