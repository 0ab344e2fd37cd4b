"""List, dict and set comprehensions, and generator expressions, inside the traced region."""

from __future__ import annotations

import torch

from ._registry import args, program, randn, x

F = "comprehensions"


@program(F, x(4, 4))
def list_comp_powers(a: torch.Tensor) -> torch.Tensor:
    return torch.stack([a**k for k in range(1, 4)]).sum(0)


@program(F, x(4, 4))
def list_comp_with_filter(a: torch.Tensor) -> torch.Tensor:
    parts = [a * k for k in range(6) if k % 2 == 1]
    return torch.cat(parts, dim=0)


@program(F, x(3, 6))
def list_comp_over_chunks(a: torch.Tensor) -> torch.Tensor:
    return torch.cat([c.relu() for c in a.chunk(3, dim=1)], dim=1)


@program(F, x(3, 4))
def nested_list_comp(a: torch.Tensor) -> torch.Tensor:
    grid = [[a[i, j] * (i + j) for j in range(4)] for i in range(3)]
    return torch.stack([torch.stack(row) for row in grid])


@program(F, x(5))
def dict_comp(a: torch.Tensor) -> torch.Tensor:
    table = {f"k{i}": a + i for i in range(3)}
    return table["k0"] * table["k2"] - table["k1"]


@program(F, x(5))
def dict_comp_from_items(a: torch.Tensor) -> torch.Tensor:
    base = {"sin": a.sin(), "cos": a.cos()}
    doubled = {k: v * 2 for k, v in base.items()}
    return doubled["sin"] + doubled["cos"]


@program(F, x(4))
def set_comp_of_ints(a: torch.Tensor) -> torch.Tensor:
    sizes = {n % 3 for n in range(10)}
    return a * len(sizes) + max(sizes)


@program(F, x(4, 4))
def generator_expression_sum(a: torch.Tensor) -> torch.Tensor:
    return sum(a[i] * i for i in range(4))


@program(F, args(lambda: [randn(3) for _ in range(4)]))
def comp_over_list_input(items: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([t.tanh() for t in items]).mean(0)


@program(F, x(2, 3))
def comp_with_enumerate(a: torch.Tensor) -> torch.Tensor:
    rows = [r * i for i, r in enumerate(a.unbind(0))]
    return torch.stack(rows)


@program(F, x(4))
def comp_reads_closure(a: torch.Tensor) -> torch.Tensor:
    bias = a.max()
    return torch.stack([a - bias * k for k in range(3)])


@program(F, x(3, 3))
def comp_with_zip(a: torch.Tensor) -> torch.Tensor:
    weights = [0.1, 0.2, 0.7]
    return sum(w * r for w, r in zip(weights, a.unbind(0)))


@program(F, x(6))
def any_all_on_constants(a: torch.Tensor) -> torch.Tensor:
    flags = [i > 2 for i in range(5)]
    if any(flags) and not all(flags):
        return a + 1
    return a - 1


@program(F, x(4, 2))
def comp_of_shapes(a: torch.Tensor) -> torch.Tensor:
    dims = [s * 2 for s in a.shape]
    return a.repeat(2, 2).reshape(dims[0], dims[1]) + 1


@program(F, x(4))
def comp_in_comp_condition(a: torch.Tensor) -> torch.Tensor:
    keep = [k for k in range(8) if k in [x * 2 for x in range(3)]]
    return a * sum(keep)
