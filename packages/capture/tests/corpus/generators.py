"""User generator functions and iterator protocols consumed inside the traced region."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from ._registry import program, x, xy

F = "generators"


def _powers(t: torch.Tensor, n: int) -> Iterator[torch.Tensor]:
    for k in range(n):
        yield t**k


def _pairs(a: torch.Tensor, b: torch.Tensor) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    yield a, b
    yield b, a


def _countdown(n: int) -> Iterator[int]:
    while n > 0:
        yield n
        n -= 1


def _delegate(t: torch.Tensor) -> Iterator[torch.Tensor]:
    yield from _powers(t, 2)
    yield t.exp()


@program(F, x(4))
def sum_of_generator(a: torch.Tensor) -> torch.Tensor:
    return sum(_powers(a, 4))


@program(F, x(4))
def list_of_generator(a: torch.Tensor) -> torch.Tensor:
    return torch.stack(list(_powers(a, 3)))


@program(F, xy((3,)))
def generator_of_tuples(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.new_zeros(3)
    for p, q in _pairs(a, b):
        out = out + p * 2 - q
    return out


@program(F, x(4))
def while_generator(a: torch.Tensor) -> torch.Tensor:
    for n in _countdown(3):
        a = a * n + 1
    return a


@program(F, x(4))
def yield_from(a: torch.Tensor) -> torch.Tensor:
    return torch.stack(list(_delegate(a))).sum(0)


@program(F, x(4))
def next_on_generator(a: torch.Tensor) -> torch.Tensor:
    gen = _powers(a, 5)
    first = next(gen)
    second = next(gen)
    return first + second


@program(F, x(4))
def iter_next_on_list(a: torch.Tensor) -> torch.Tensor:
    it = iter([a.sin(), a.cos(), a.tan()])
    head = next(it)
    rest = list(it)
    return head * rest[0] + rest[1]


@program(F, x(4))
def next_with_default(a: torch.Tensor) -> torch.Tensor:
    it = iter([])
    fallback = next(it, None)
    return a if fallback is None else a + 1


@program(F, x(5))
def generator_expression_to_tuple(a: torch.Tensor) -> torch.Tensor:
    parts = tuple(a * k for k in range(3))
    return parts[0] + parts[2]


@program(F, x(2, 4))
def generator_with_early_break(a: torch.Tensor) -> torch.Tensor:
    total = a.new_zeros(2, 4)
    for k, term in enumerate(_powers(a, 10)):
        if k == 3:
            break
        total = total + term
    return total


@program(F, x(4))
def generator_max(a: torch.Tensor) -> torch.Tensor:
    biggest = max(k * k for k in range(5))
    return a * biggest


@program(F, x(4, 4))
def map_and_filter(a: torch.Tensor) -> torch.Tensor:
    rows = list(map(torch.relu, a.unbind(0)))
    picked = list(filter(lambda r: True, rows))
    return torch.stack(picked).sum()


def _inner_steps(t: torch.Tensor) -> Iterator[torch.Tensor]:
    yield t.sin()
    yield t.cos()


def _outer_steps(t: torch.Tensor) -> Iterator[torch.Tensor]:
    yield t
    yield from _inner_steps(t * 2)
    yield from [t.exp()]


@program(F, x(4))
def yield_from_nested_generators(a: torch.Tensor) -> torch.Tensor:
    return sum(_outer_steps(a))


@program(F, x(4))
def yield_from_in_comprehension(a: torch.Tensor) -> torch.Tensor:
    return torch.stack([step * 2 for step in _outer_steps(a)]).amax(0)
