"""Plain tensor programs: basic and advanced indexing, gather/scatter, index_select, masking."""

from __future__ import annotations

import torch

from ._registry import args, ints, program, randn, x

F = "indexing"


def _index(high: int, n: int) -> torch.Tensor:
    return torch.randint(0, high, (n,))


@program(F, x(5, 6))
def basic_slices(a: torch.Tensor) -> torch.Tensor:
    return a[1:4, ::2] + a[-3:, 1:4]


@program(F, x(5, 6))
def integer_and_ellipsis(a: torch.Tensor) -> torch.Tensor:
    return a[2] + a[..., 3].sum() + a[None, 1, :].squeeze(0)


@program(F, args(lambda: randn(5, 6), lambda: _index(5, 3)))
def advanced_index_tensor(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return a[idx] * 2


@program(F, args(lambda: randn(5, 6), lambda: _index(5, 4), lambda: _index(6, 4)))
def advanced_index_pairs(a: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    return a[rows, cols]


@program(F, x(5, 6))
def index_with_python_list(a: torch.Tensor) -> torch.Tensor:
    return a[[0, 2, 4]] + a[:, [1, 1, 2, 3, 5, 0]][:3]


@program(F, args(lambda: randn(4, 6), lambda: torch.randint(0, 6, (4, 2))))
def gather_dim1(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return a.gather(1, idx)


@program(F, args(lambda: randn(4, 6), lambda: _index(6, 3)))
def index_select(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return a.index_select(1, idx).sum(1)


@program(F, args(lambda: randn(3, 5), lambda: torch.randint(0, 5, (3, 5))))
def scatter_add(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.zeros(3, 5).scatter_add(1, idx, a)


@program(F, args(lambda: randn(6, 4), lambda: _index(6, 5)))
def index_add(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.zeros(6, 4).index_add(0, idx, a[:5])


@program(F, x(4, 4))
def masked_fill_functional(a: torch.Tensor) -> torch.Tensor:
    return a.masked_fill(a < 0, 0.0).masked_fill(a > 1, 1.0)


@program(F, args(lambda: ints(10, 6), lambda: randn(10, 3)))
def embedding_lookup(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.embedding(ids, table).sum(0)


@program(F, args(lambda: randn(6, 4), lambda: torch.randint(0, 4, (6,))))
def one_hot_and_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    onehot = torch.nn.functional.one_hot(target, 4).float()
    return torch.nn.functional.cross_entropy(logits, target) + (onehot * logits).sum()


@program(F, x(4, 4))
def setitem_with_mask_on_clone(a: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out[out > 0] = 0.5
    return out


@program(F, args(lambda: randn(5, 3), lambda: _index(5, 4)))
def index_put_accumulate(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return torch.zeros(5, 3).index_put((idx,), a[:4], accumulate=True)


@program(F, x(4, 5))
def take_along_dim_argsort(a: torch.Tensor) -> torch.Tensor:
    order = a.argsort(dim=1)
    return torch.take_along_dim(a, order, dim=1)


@program(F, x(3, 4, 5))
def negative_step_free_slicing(a: torch.Tensor) -> torch.Tensor:
    return a[:, 1:-1, ::2] + a[:, :2, 1::2].sum()
