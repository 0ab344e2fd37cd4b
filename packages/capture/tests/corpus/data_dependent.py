"""Branches and loops whose control flow depends on tensor values (graph breaks or torch.where)."""

from __future__ import annotations

import torch

from ._registry import program, x, xy

F = "data_dependent"


@program(F, x(4))
def if_on_sum(a: torch.Tensor) -> torch.Tensor:
    b = a * 2
    if b.sum() > 0:
        return b.sin()
    return b.cos()


@program(F, x(4))
def if_on_any(a: torch.Tensor) -> torch.Tensor:
    if (a > 1.5).any():
        a = a.clamp(max=1.5)
    return a * 2


@program(F, x(4))
def while_on_norm(a: torch.Tensor) -> torch.Tensor:
    steps = 0
    while a.norm() > 0.5 and steps < 20:
        a = a * 0.5
        steps += 1
    return a


@program(F, x(4))
def where_instead_of_branch(a: torch.Tensor) -> torch.Tensor:
    return torch.where(a > 0, a * 2, a.exp())


@program(F, x(6))
def nonzero_dynamic_shape(a: torch.Tensor) -> torch.Tensor:
    idx = (a > 0).nonzero()
    return a.sum() + idx.shape[0]


@program(F, x(6))
def boolean_mask_select(a: torch.Tensor) -> torch.Tensor:
    picked = a[a > 0]
    return picked.sum() + a.mean()


@program(F, x(6))
def unique_values(a: torch.Tensor) -> torch.Tensor:
    vals = torch.unique((a * 2).round())
    return vals.sum()


@program(F, xy((4,)))
def branch_on_comparison_of_tensors(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if a.mean() > b.mean():
        return a - b
    return b - a


@program(F, x(4))
def branch_in_middle(a: torch.Tensor) -> torch.Tensor:
    b = a.exp()
    c = b * 3
    if c.max() > 5:
        c = c / c.max()
    d = c.log1p()
    return d + b


@program(F, x(4))
def ternary_on_tensor(a: torch.Tensor) -> torch.Tensor:
    return a.relu() if a[0] > 0 else a.neg()


@program(F, x(3, 3))
def loop_with_tensor_break(a: torch.Tensor) -> torch.Tensor:
    out = a
    for _ in range(5):
        out = out @ a * 0.5
        if out.abs().max() < 0.1:
            break
    return out


@program(F, x(8))
def masked_scatter_dynamic(a: torch.Tensor) -> torch.Tensor:
    mask = a > 0
    return a.masked_select(mask).sum() * 2


@program(F, x(4))
def all_close_branch(a: torch.Tensor) -> torch.Tensor:
    if torch.allclose(a, a * 1.0):
        return a + 1
    return a


@program(F, x(4))
def while_on_max_halving(a: torch.Tensor) -> torch.Tensor:
    while a.abs().max() > 1.0:
        a = a / 2
    return a + 1


@program(F, x(4))
def while_tensor_condition_with_counter(a: torch.Tensor) -> torch.Tensor:
    count = 0
    while (a.sum() > -100) and count < 3:
        a = a - 1
        count += 1
    return a * count


@program(F, x(8))
def for_loop_with_data_dependent_break(a: torch.Tensor) -> torch.Tensor:
    total = a.new_zeros(())
    for k in range(8):
        total = total + a[k]
        if total > 1.0:
            break
    return total * 2
