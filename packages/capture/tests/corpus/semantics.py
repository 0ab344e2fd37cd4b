"""More Python semantics a tracer must reproduce: exceptions as values, identity, truthiness, printing."""

from __future__ import annotations

import collections.abc
import io
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ._registry import args, module, program, randn, stateful, x

F = "semantics"


@program(F, x(4))
def exception_message_used(a: torch.Tensor) -> torch.Tensor:
    try:
        raise ValueError("four")
    except ValueError as error:
        n = len(str(error))
    return a * n


@program(F, x(4))
def memoised_recursion(a: torch.Tensor) -> torch.Tensor:
    memo: dict[int, int] = {}

    def fib(n: int) -> int:
        if n < 2:
            return n
        if n not in memo:
            memo[n] = fib(n - 1) + fib(n - 2)
        return memo[n]

    return a * fib(10)


@program(F, args(lambda: [randn(3), randn(3)]))
def isinstance_against_abc(items: Any) -> torch.Tensor:
    if isinstance(items, collections.abc.Sequence) and not isinstance(items, collections.abc.Mapping):
        return items[0] + items[-1]
    return items


def _aliased() -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.randn(4)
    return t, t


@program(F, _aliased)
def identity_of_aliased_inputs(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * 2 if a is b else a - b


@program(F, x(4))
def identity_of_intermediates(a: torch.Tensor) -> torch.Tensor:
    b = a.relu()
    c = b
    d = b.clone()
    return d * (2 if c is b else 0) + (1 if d is not b else 0)


@stateful(F, x(4))
def print_to_buffer() -> Callable[..., Any]:
    buffer = io.StringIO()

    def run(a: torch.Tensor) -> torch.Tensor:
        print("shape", tuple(a.shape), file=buffer)
        return a * len(buffer.getvalue())

    return run


@program(F, args(lambda: [randn(2), randn(5), randn(3)]))
def max_with_key_on_shapes(items: list[torch.Tensor]) -> torch.Tensor:
    longest = max(items, key=lambda t: t.shape[0])
    return longest.sum() + len(longest)


@program(F, args(lambda: [randn(3)]))
def truthiness_of_containers(items: list[torch.Tensor]) -> torch.Tensor:
    extra: list[torch.Tensor] = []
    out = items[0] if items else torch.zeros(3)
    return out + (1 if not extra else 2) + (3 if {"k": 1} else 0)


@program(F, x(2, 5))
def unpack_tensor_rows(a: torch.Tensor) -> torch.Tensor:
    first, second = a
    return first * second


@program(F, x(6, 2))
def len_of_tensor_and_range_len(a: torch.Tensor) -> torch.Tensor:
    out = a[0]
    for i in range(len(a)):
        if i % 2:
            out = out + a[i]
    return out


@program(F, x(7, 3))
def divmod_on_shape(a: torch.Tensor) -> torch.Tensor:
    q, r = divmod(a.shape[0], 3)
    return a[: q * 3].reshape(q, 3, 3).sum(1) + r


@program(F, x(4))
def sum_with_tensor_start(a: torch.Tensor) -> torch.Tensor:
    return sum([a, a * 2], a.new_ones(4))


@program(F, x(4))
def optional_and_numel_check(a: torch.Tensor) -> torch.Tensor:
    mask = None
    if mask is not None and mask.numel() > 0:
        return a * mask
    if a is not None and a.numel() > 0:
        return a + 1
    return a


@module(F, x(2, 4))
class HookReturningNone(nn.Module):
    """A forward hook returning None leaves the output as is; a second hook scales it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.calls = 0
        self.fc.register_forward_hook(self._count)
        self.fc.register_forward_hook(lambda mod, inp, out: out * 3)

    def _count(self, mod: nn.Module, inp: Any, out: torch.Tensor) -> None:
        self.calls += 1

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc(a) + self.calls


@module(F, x(2, 4))
class NoGradDecoratedMethod(nn.Module):
    """A method decorated with torch.no_grad() called from forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    @torch.no_grad()
    def statistics(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc(a).mean()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc(a) - self.statistics(a)


@program(F, x(3, 4))
def inplace_transpose_of_intermediate(a: torch.Tensor) -> torch.Tensor:
    b = a.clone()
    b.t_()
    b.mul_(2).add_(1)
    return b


@program(F, x(4))
def dict_reinsertion_order(a: torch.Tensor) -> torch.Tensor:
    d = {"a": 1.0, "b": 2.0, "c": 3.0}
    del d["a"]
    d["a"] = 10.0
    first_key = next(iter(d))
    return a * d[first_key] + list(d.values())[-1]
