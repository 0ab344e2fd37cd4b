"""Plain tensor programs: sums, means, norms, softmax, argmax, cumulative and statistical reductions."""

from __future__ import annotations

import torch

from ._registry import program, x

F = "reductions"


@program(F, x(4, 5))
def sum_all_and_dim(a: torch.Tensor) -> torch.Tensor:
    return a.sum() + a.sum(0).sum() + a.sum(dim=1, keepdim=True).mean()


@program(F, x(4, 5))
def mean_var_std(a: torch.Tensor) -> torch.Tensor:
    return a.mean(1) + a.var(1) + a.std(1, unbiased=False)


@program(F, x(4, 5))
def max_min_with_indices(a: torch.Tensor) -> torch.Tensor:
    values, indices = a.max(dim=1)
    low, _ = a.min(dim=0)
    return values + indices.float() + low.sum()


@program(F, x(4, 5))
def argmax_argmin(a: torch.Tensor) -> torch.Tensor:
    return (a.argmax(1) - a.argmin(1)).float() + a.argmax()


@program(F, x(4, 5))
def amax_amin(a: torch.Tensor) -> torch.Tensor:
    return a.amax(dim=(0, 1)) - a.amin(1)


@program(F, x(4, 5))
def softmax_log_softmax(a: torch.Tensor) -> torch.Tensor:
    return torch.softmax(a, -1) + torch.log_softmax(a, dim=0)


@program(F, x(4, 5))
def logsumexp(a: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(a, dim=1)


@program(F, x(4, 5))
def manual_softmax(a: torch.Tensor) -> torch.Tensor:
    e = (a - a.max(-1, keepdim=True).values).exp()
    return e / e.sum(-1, keepdim=True)


@program(F, x(4, 5))
def norms(a: torch.Tensor) -> torch.Tensor:
    return a.norm() + torch.linalg.vector_norm(a, ord=1, dim=1).sum() + a.norm(dim=0, p=2).sum()


@program(F, x(4, 5))
def cumsum_cumprod(a: torch.Tensor) -> torch.Tensor:
    return a.cumsum(1) + (a * 0.5).cumprod(0)


@program(F, x(4, 5))
def prod_reduction(a: torch.Tensor) -> torch.Tensor:
    return (a * 0.5 + 1).prod(1)


@program(F, x(4, 5))
def any_all_reductions(a: torch.Tensor) -> torch.Tensor:
    return (a > 0).any(1).float() + (a > -5).all(1).float()


@program(F, x(4, 5))
def count_nonzero_and_mean_of_mask(a: torch.Tensor) -> torch.Tensor:
    return torch.count_nonzero(a > 0, dim=1).float() + (a > 0).float().mean()


@program(F, x(6, 5))
def topk_and_sort(a: torch.Tensor) -> torch.Tensor:
    top = a.topk(2, dim=1).values
    ordered, _ = a.sort(dim=0, descending=True)
    return top.sum() + ordered[0]


@program(F, x(4, 5))
def cummax_logcumsumexp(a: torch.Tensor) -> torch.Tensor:
    return torch.cummax(a, 1).values + torch.logcumsumexp(a, 1)


@program(F, x(4, 5))
def median_and_mode_free(a: torch.Tensor) -> torch.Tensor:
    return a.median(dim=1).values + a.mean()


@program(F, x(3, 4, 5))
def reduce_multiple_dims(a: torch.Tensor) -> torch.Tensor:
    return a.sum(dim=(0, 2)) + a.mean(dim=[1, 2]).sum()
