"""Closures, nested functions, nonlocal and lambdas inside the traced region."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._registry import program, stateful, x, xy

F = "closures"


@program(F, x(4, 4))
def reads_outer_constant(a: torch.Tensor) -> torch.Tensor:
    scale = 3.0

    def inner(t: torch.Tensor) -> torch.Tensor:
        return t * scale

    return inner(a) + 1


@program(F, xy((4, 4)))
def reads_outer_tensor(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    def inner(t: torch.Tensor) -> torch.Tensor:
        return t + b

    return inner(a).relu()


@program(F, x(8))
def nonlocal_counter(a: torch.Tensor) -> torch.Tensor:
    count = 0

    def bump(t: torch.Tensor) -> torch.Tensor:
        nonlocal count
        count += 1
        return t * count

    y = bump(a)
    y = bump(y)
    return y + count


@program(F, x(8))
def nonlocal_tensor_accumulator(a: torch.Tensor) -> torch.Tensor:
    total = torch.zeros_like(a)

    def add(t: torch.Tensor) -> None:
        nonlocal total
        total = total + t

    for k in range(3):
        add(a * k)
    return total


@program(F, x(3, 5))
def lambda_inline(a: torch.Tensor) -> torch.Tensor:
    act = lambda t: t.sigmoid() * t  # noqa: E731
    return act(a) - act(a * 2)


@program(F, x(6))
def lambda_captures(a: torch.Tensor) -> torch.Tensor:
    shift = a.mean()
    centre = lambda t: t - shift  # noqa: E731
    return centre(a).abs()


def _make_scaler(factor: float) -> Callable[[torch.Tensor], torch.Tensor]:
    def scale(t: torch.Tensor) -> torch.Tensor:
        return t * factor

    return scale


_DOUBLE = _make_scaler(2.0)


@program(F, x(4))
def global_closure(a: torch.Tensor) -> torch.Tensor:
    return _DOUBLE(a) + _make_scaler(0.5)(a)


@program(F, x(4, 4))
def closure_factory_inside(a: torch.Tensor) -> torch.Tensor:
    def make(power: int) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda t: t**power

    fns = [make(p) for p in (1, 2, 3)]
    return sum(f(a) for f in fns)


@program(F, x(5))
def nested_three_levels(a: torch.Tensor) -> torch.Tensor:
    def outer(t: torch.Tensor) -> torch.Tensor:
        bias = t.sum()

        def middle(u: torch.Tensor) -> torch.Tensor:
            def inner(v: torch.Tensor) -> torch.Tensor:
                return v + bias

            return inner(u) * 2

        return middle(t)

    return outer(a)


@program(F, x(4))
def recursive_inner(a: torch.Tensor) -> torch.Tensor:
    def repeat(t: torch.Tensor, n: int) -> torch.Tensor:
        if n == 0:
            return t
        return repeat(t.sin(), n - 1)

    return repeat(a, 3)


@program(F, xy((4,)))
def closure_over_loop_variable(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    fns = []
    for k in range(3):
        fns.append(lambda t, k=k: t * k)
    return sum(f(a) for f in fns) + b


@program(F, x(4))
def nonlocal_list_append(a: torch.Tensor) -> torch.Tensor:
    seen: list[torch.Tensor] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        seen.append(t)
        return t.cos()

    keep(keep(a))
    return torch.stack(seen).sum(0)


@program(F, x(3, 3))
def closure_returned_and_called(a: torch.Tensor) -> torch.Tensor:
    def adder(k: float) -> Callable[[torch.Tensor], torch.Tensor]:
        def add(t: torch.Tensor) -> torch.Tensor:
            return t + k

        return add

    return adder(1.5)(a) * adder(-1.0)(a)


@stateful(F, x(4))
def counter_in_dict_closure() -> Callable[[torch.Tensor], torch.Tensor]:
    state = {"calls": 0}

    def run(a: torch.Tensor) -> torch.Tensor:
        state["calls"] += 1
        return a * state["calls"]

    return run


@stateful(F, x(3, 4))
def closure_over_constant_tensor() -> Callable[[torch.Tensor], torch.Tensor]:
    weight = torch.linspace(0.5, 1.5, 4)

    def run(a: torch.Tensor) -> torch.Tensor:
        return (a * weight).sum(-1)

    return run


@program(F, x(4))
def decorator_inside(a: torch.Tensor) -> torch.Tensor:
    def twice(fn: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        def wrapped(t: torch.Tensor) -> torch.Tensor:
            return fn(fn(t))

        return wrapped

    @twice
    def step(t: torch.Tensor) -> torch.Tensor:
        return t * 0.5 + 1

    return step(a)
