"""Global and attribute mutation, in-place tensor ops on inputs, and mutation of Python containers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ._registry import args, program, randn, stateful, x, xy

F = "mutation"

CALLS = 0
SCALE = 2.0
HISTORY: list[float] = []
CACHE: dict[str, torch.Tensor] = {}
STATE = {"steps": 0}


@stateful(F, x(4))
def global_counter_increment() -> Callable[..., Any]:
    global CALLS
    CALLS = 0

    def run(a: torch.Tensor) -> torch.Tensor:
        global CALLS
        CALLS += 1
        return a * CALLS

    return run


@program(F, x(4))
def global_constant_read(a: torch.Tensor) -> torch.Tensor:
    return a * SCALE


@stateful(F, x(4))
def global_list_append() -> Callable[..., Any]:
    HISTORY.clear()

    def run(a: torch.Tensor) -> torch.Tensor:
        HISTORY.append(1.5)
        return a * len(HISTORY) + sum(HISTORY)

    return run


@stateful(F, x(4))
def global_dict_cache_tensor() -> Callable[..., Any]:
    CACHE.clear()

    def run(a: torch.Tensor) -> torch.Tensor:
        CACHE["last"] = a * 2
        return CACHE["last"] + 1

    return run


@stateful(F, x(4))
def global_dict_counter() -> Callable[..., Any]:
    STATE["steps"] = 0

    def run(a: torch.Tensor) -> torch.Tensor:
        STATE["steps"] += 2
        return a + STATE["steps"]

    return run


class Tracker:
    """An object whose attributes are mutated by the program."""

    def __init__(self) -> None:
        self.count = 0
        self.last: torch.Tensor | None = None

    def __call__(self, a: torch.Tensor) -> torch.Tensor:
        self.count += 1
        self.last = a.sum()
        return a * self.count


@stateful(F, x(4))
def attribute_mutation_on_object() -> Callable[..., Any]:
    return Tracker()


@program(F, x(4))
def inplace_on_input(a: torch.Tensor) -> torch.Tensor:
    a.mul_(2)
    a.add_(1)
    return a


@program(F, xy((4,)))
def inplace_on_intermediate(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = a + b
    c.relu_()
    c += b
    return c


@program(F, x(4, 4))
def index_assignment(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out[0] = 1.0
    out[:, 1] = a[:, 2] * 3
    return out


@program(F, x(4, 4))
def masked_fill_inplace(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out.masked_fill_(a > 0.5, -1.0)
    return out


@program(F, args(lambda: [randn(3), randn(3)]))
def list_input_mutated(items: list[torch.Tensor]) -> torch.Tensor:
    items.append(items[0] * 2)
    return torch.stack(items).sum(0)


@program(F, args(lambda: {"a": randn(3)}))
def dict_input_mutated(d: dict[str, torch.Tensor]) -> torch.Tensor:
    d["b"] = d["a"].exp()
    return d["a"] + d["b"]


@program(F, x(4))
def inplace_on_view(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    view = out[1:3]
    view.mul_(10)
    return out


@program(F, x(4))
def copy_into_input(a: torch.Tensor) -> torch.Tensor:
    a.copy_(a.sin())
    return a * 2


@program(F, x(4))
def setitem_on_input(a: torch.Tensor) -> torch.Tensor:
    a[0] = a[1] + a[2]
    return a.cumsum(0)
