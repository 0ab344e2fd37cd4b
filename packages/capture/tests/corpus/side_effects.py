"""Side effects capture must replay exactly: aliased inputs, views, out= arguments, mutation around breaks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._registry import args, program, randn, stateful, x

F = "side_effects"

BUFFER = torch.zeros(4)


def _aliased_pair() -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.randn(4)
    return t, t


def _base_and_view() -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.randn(6)
    return t, t[1:4]


@program(F, _aliased_pair)
def aliased_inputs_inplace(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a.add_(1)
    return b * 2


@program(F, _base_and_view)
def view_input_mutated(base: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
    view.mul_(2)
    return base + 1


@program(F, _base_and_view)
def base_input_mutated_view_read(base: torch.Tensor, view: torch.Tensor) -> torch.Tensor:
    base.sub_(1)
    return view.sum()


@program(F, x(4))
def dict_holds_alias_before_mutation(a: torch.Tensor) -> torch.Tensor:
    d = {"k": a}
    a.add_(1)
    return d["k"] * 2


@program(F, args(lambda: randn(4), lambda: randn(4), lambda: randn(4)))
def out_argument(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    torch.add(a, b, out=out)
    return out * 2


@program(F, x(4))
def mutation_around_data_dependent_break(a: torch.Tensor) -> torch.Tensor:
    a.mul_(2)
    if a.sum() > 0:
        a.add_(1)
    else:
        a.sub_(1)
    return a.clone()


@program(F, x(4))
def mutation_then_item(a: torch.Tensor) -> torch.Tensor:
    a.mul_(3)
    k = a.max().item()
    a.div_(abs(k) + 1)
    return a * 2


@stateful(F, x(4))
def global_tensor_mutated_in_place() -> Callable[..., Any]:
    BUFFER.fill_(1.0)

    def run(a: torch.Tensor) -> torch.Tensor:
        BUFFER.add_(a)
        return BUFFER * 2

    return run


class Holder:
    """An object holding a tensor that the program mutates in place."""

    def __init__(self) -> None:
        self.state = torch.ones(4)

    def __call__(self, a: torch.Tensor) -> torch.Tensor:
        self.state.mul_(a.sigmoid())
        return self.state + a


@stateful(F, x(4))
def object_tensor_attribute_mutated() -> Callable[..., Any]:
    return Holder()


@program(F, x(4))
def same_tensor_returned_twice(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b = a * 2
    return b, b


@program(F, x(4))
def input_returned_unchanged(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return a, a.sin()


@program(F, x(3, 4))
def inplace_under_no_grad_on_input(a: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        a[0].zero_()
        a.clamp_(-0.5, 0.5)
    return a.sum(0)


@program(F, args(lambda: {"items": [randn(3)]}))
def nested_container_mutated(d: dict[str, list[torch.Tensor]]) -> torch.Tensor:
    d["items"].append(d["items"][0] * 3)
    d["count"] = len(d["items"])
    return torch.stack(d["items"]).sum(0)


@program(F, x(4))
def mutation_in_called_function(a: torch.Tensor) -> torch.Tensor:
    def bump(t: torch.Tensor) -> None:
        t.add_(10)

    bump(a)
    return a.exp()


@program(F, x(2, 4))
def setitem_broadcast_on_input(a: torch.Tensor) -> torch.Tensor:
    a[:, 1:3] = torch.tensor([5.0, -5.0])
    return a.mean(0)


@program(F, x(4))
def python_attribute_on_tensor(a: torch.Tensor) -> tuple[torch.Tensor, int]:
    b = a * 2
    b.tag = 3
    c = b + b.tag
    return c, b.tag
