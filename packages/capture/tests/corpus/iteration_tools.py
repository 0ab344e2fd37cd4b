"""itertools over values known at trace time (constants, lists of tensors, module lists)."""

from __future__ import annotations

import itertools

import torch

from ._registry import args, program, randn, x

F = "iteration_tools"


@program(F, x(4))
def product_with_repeat(a: torch.Tensor) -> torch.Tensor:
    out = a
    for i, j in itertools.product([1, 2], repeat=2):
        out = out * 0.5 + i - j
    return out


@program(F, x(4))
def combinations_of_tensors(a: torch.Tensor) -> torch.Tensor:
    parts = [a, a.sin(), a.cos()]
    return sum(p * q for p, q in itertools.combinations(parts, 2))


@program(F, x(4))
def permutations_of_constants(a: torch.Tensor) -> torch.Tensor:
    orders = list(itertools.permutations(range(3)))
    return a * len(orders) + orders[-1][0]


@program(F, x(4))
def islice_of_list(a: torch.Tensor) -> torch.Tensor:
    parts = [a * k for k in range(6)]
    return torch.stack(list(itertools.islice(parts, 1, 5, 2))).sum(0)


@program(F, x(4))
def zip_longest_with_fill(a: torch.Tensor) -> torch.Tensor:
    out = a
    for left, right in itertools.zip_longest([1, 2, 3], [10], fillvalue=0):
        out = out + left * right
    return out


@program(F, x(4))
def pairwise_differences(a: torch.Tensor) -> torch.Tensor:
    steps = [a, a * 2, a.exp()]
    return sum(second - first for first, second in itertools.pairwise(steps))


@program(F, x(4))
def starmap_over_pairs(a: torch.Tensor) -> torch.Tensor:
    pairs = [(a, 2.0), (a.sin(), 3.0)]
    return sum(itertools.starmap(torch.mul, pairs))


@program(F, x(4))
def accumulate_with_function(a: torch.Tensor) -> torch.Tensor:
    prefix = list(itertools.accumulate([a, a.cos(), a.sin()], torch.maximum))
    return prefix[-1] + prefix[0]


@program(F, x(4))
def repeat_and_chain_from_iterable(a: torch.Tensor) -> torch.Tensor:
    flat = list(itertools.chain.from_iterable([[a, a * 2], itertools.repeat(a.exp(), 2)]))
    return torch.stack(flat).mean(0)


@program(F, x(4))
def takewhile_dropwhile_constants(a: torch.Tensor) -> torch.Tensor:
    sizes = [1, 2, 8, 3]
    small = list(itertools.takewhile(lambda n: n < 5, sizes))
    rest = list(itertools.dropwhile(lambda n: n < 5, sizes))
    return a * sum(small) + rest[0]


@program(F, args(lambda: [randn(3) for _ in range(4)]))
def compress_list_input(items: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(list(itertools.compress(items, [1, 0, 1, 1]))).sum(0)
