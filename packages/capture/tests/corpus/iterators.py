"""enumerate, zip, reversed, range with computed bounds, itertools, and loops over tensors and modules."""

from __future__ import annotations

import itertools

import torch

from ._registry import args, program, randn, x, xy

F = "iterators"


@program(F, x(5, 3))
def range_from_shape(a: torch.Tensor) -> torch.Tensor:
    out = a[0]
    for i in range(1, a.shape[0]):
        out = out + a[i] * i
    return out


@program(F, x(6, 2))
def range_with_step(a: torch.Tensor) -> torch.Tensor:
    n = a.size(0)
    return sum(a[i] for i in range(0, n, 2))


@program(F, x(8))
def range_computed_bounds(a: torch.Tensor) -> torch.Tensor:
    half = len(a) // 2
    out = a.new_zeros(())
    for i in range(half - 1, half + 2):
        out = out + a[i]
    return out


@program(F, x(4))
def range_negative_step(a: torch.Tensor) -> torch.Tensor:
    parts = [a * k for k in range(5, 0, -2)]
    return torch.stack(parts)


@program(F, x(4, 3))
def enumerate_rows(a: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(3)
    for i, row in enumerate(a):
        out = out + row * (i + 1)
    return out


@program(F, x(4, 3))
def enumerate_start(a: torch.Tensor) -> torch.Tensor:
    return torch.stack([r * i for i, r in enumerate(a.unbind(0), start=2)])


@program(F, xy((3, 4)))
def zip_two_tensors(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.stack([p * q for p, q in zip(a, b)])


@program(F, x(4, 2))
def reversed_list(a: torch.Tensor) -> torch.Tensor:
    out = a[0]
    for row in reversed(list(a.unbind(0))):
        out = out * 0.5 + row
    return out


@program(F, x(5))
def reversed_range(a: torch.Tensor) -> torch.Tensor:
    out = a
    for k in reversed(range(3)):
        out = out * (k + 1)
    return out


@program(F, x(4))
def while_loop_constant(a: torch.Tensor) -> torch.Tensor:
    k = 0
    while k < 4:
        a = a * 0.9 + 0.1
        k += 1
    return a


@program(F, x(4))
def itertools_product(a: torch.Tensor) -> torch.Tensor:
    out = a
    for i, j in itertools.product(range(2), range(3)):
        out = out + i * j
    return out


@program(F, x(4))
def itertools_chain(a: torch.Tensor) -> torch.Tensor:
    return sum(itertools.chain([a, a * 2], [a * 3]))


@program(F, x(4))
def itertools_accumulate(a: torch.Tensor) -> torch.Tensor:
    return a * list(itertools.accumulate([1, 2, 3]))[-1]


@program(F, x(4, 4))
def zip_strict_lengths(a: torch.Tensor) -> torch.Tensor:
    scales = (1.0, 2.0, 3.0, 4.0)
    return torch.stack([row * s for row, s in zip(a, scales)])


@program(F, args(lambda: [randn(3) for _ in range(3)]))
def loop_over_list_input(items: list[torch.Tensor]) -> torch.Tensor:
    out = items[0]
    for t in items[1:]:
        out = torch.maximum(out, t)
    return out


@program(F, x(3, 4))
def loop_with_continue(a: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(4)
    for i in range(6):
        if i % 3 == 0:
            continue
        out = out + a[i % 3]
    return out


@program(F, x(4))
def iterate_dict_sorted(a: torch.Tensor) -> torch.Tensor:
    d = {"b": 2.0, "a": 1.0, "c": 3.0}
    for key in sorted(d):
        a = a * d[key] + 1
    return a


@program(F, x(3, 2))
def zip_enumerate_combined(a: torch.Tensor) -> torch.Tensor:
    names = ["x", "y", "z"]
    out = a.new_zeros(2)
    for i, (name, row) in enumerate(zip(names, a)):
        out = out + row * (i + len(name))
    return out
