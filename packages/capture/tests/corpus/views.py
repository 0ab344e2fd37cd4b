"""Plain tensor programs: reshape, view, permute, transpose, squeeze, expand, cat/stack, split/chunk."""

from __future__ import annotations

import torch

from ._registry import args, program, randn, x, xy

F = "views"


@program(F, x(2, 3, 4))
def view_and_reshape(a: torch.Tensor) -> torch.Tensor:
    return a.view(6, 4).reshape(4, 6) + 1


@program(F, x(2, 3, 4))
def permute_contiguous(a: torch.Tensor) -> torch.Tensor:
    return a.permute(2, 0, 1).contiguous().view(4, -1)


@program(F, x(3, 4))
def transpose_ops(a: torch.Tensor) -> torch.Tensor:
    return a.t() @ a + a.transpose(0, 1).mT.sum()


@program(F, x(3, 1, 4))
def squeeze_unsqueeze(a: torch.Tensor) -> torch.Tensor:
    return a.squeeze(1).unsqueeze(0).unsqueeze(-1).squeeze()


@program(F, x(3, 1))
def expand_and_repeat(a: torch.Tensor) -> torch.Tensor:
    return a.expand(3, 4) + a.repeat(1, 4) + a.expand_as(torch.empty(3, 4))


@program(F, xy((2, 3)))
def cat_and_stack(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.cat([a, b], dim=1).sum() + torch.stack([a, b], dim=0)


@program(F, x(6, 4))
def split_and_chunk(a: torch.Tensor) -> torch.Tensor:
    p, q, r = a.chunk(3)
    s, t = a.split([2, 4], dim=0)
    return p + q * r + s.sum() + t.mean()


@program(F, x(2, 3, 4))
def flatten_unflatten(a: torch.Tensor) -> torch.Tensor:
    return a.flatten(1).unflatten(1, (4, 3)) * 2


@program(F, x(4, 4))
def unbind_and_restack(a: torch.Tensor) -> torch.Tensor:
    rows = a.unbind(1)
    return torch.stack(rows[::-1], dim=1)


@program(F, x(2, 3, 4))
def movedim_and_swapaxes(a: torch.Tensor) -> torch.Tensor:
    return a.movedim(0, -1).swapaxes(0, 1).reshape(-1)


@program(F, x(5, 6))
def narrow_and_select(a: torch.Tensor) -> torch.Tensor:
    return a.narrow(1, 1, 3) + a.select(0, 2).unsqueeze(-1)[:3].t()


@program(F, x(8))
def as_strided_like_unfold(a: torch.Tensor) -> torch.Tensor:
    return a.unfold(0, 3, 1).sum(-1)


@program(F, x(4, 4))
def flip_roll(a: torch.Tensor) -> torch.Tensor:
    return a.flip(0) + a.roll(1, dims=1) + torch.rot90(a)


@program(F, x(3, 3))
def tril_triu_diag(a: torch.Tensor) -> torch.Tensor:
    return a.tril() - a.triu(1) + torch.diag(a.diagonal()) + torch.diag_embed(a[0])


@program(F, args(lambda: randn(2, 3), lambda: randn(3)))
def broadcast_tensors_and_to(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    p, q = torch.broadcast_tensors(a, b)
    return p * q + torch.broadcast_to(b, (2, 3))


@program(F, x(2, 3))
def view_as_and_reshape_as(a: torch.Tensor) -> torch.Tensor:
    target = torch.empty(3, 2)
    return a.reshape_as(target) + a.t().contiguous().view_as(target)


@program(F, x(4, 6))
def tensor_split_and_hstack(a: torch.Tensor) -> torch.Tensor:
    parts = torch.tensor_split(a, 3, dim=1)
    return torch.hstack(parts) + torch.vstack([a]) - torch.dstack([a]).squeeze(-1)
