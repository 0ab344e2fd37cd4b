"""A scatter into a tensor with no elements raises as eager does when an index is out of range.

Kiln lowers the scatter family as a gather over the output (each output element scans the
sources): over an output with no elements it checked no index and returned an empty tensor, where
eager's kernels check every index they are given (fuzz: ``index_add`` of 11 indices into a tensor
of size 0 raised ``IndexError`` in eager only). Such scatters now run eager's kernel.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch

import frontend


def _rows(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """Source rows for `x` along dim 0, one per index."""
    return torch.ones(i.shape[0], *x.shape[1:])


def _spread(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    """`i` as a scatter index along dim 0 of `x`."""
    return i.view(-1, *[1] * (x.dim() - 1)).expand(i.shape[0], *x.shape[1:]).contiguous()


SCATTERS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "index_add": lambda x, i: x.index_add(0, i, _rows(x, i)),
    "index_reduce": lambda x, i: x.index_reduce(0, i, _rows(x, i), "prod"),
    "put": lambda x, i: x.put(i, torch.ones(i.shape[0])),
    "index_put": lambda x, i: x.index_put((i,), _rows(x, i)),
    "index_put_accumulate": lambda x, i: x.index_put((i,), _rows(x, i), accumulate=True),
    "index_copy": lambda x, i: x.index_copy(0, i, _rows(x, i)),
    "index_fill": lambda x, i: x.index_fill(0, i, 1.0),
    "scatter": lambda x, i: x.scatter(0, _spread(x, i), 1.0),
    "scatter_add": lambda x, i: x.scatter_add(0, _spread(x, i), _rows(x, i)),
}


def _error(fn: Callable[..., torch.Tensor], *args: torch.Tensor) -> type[Exception] | None:
    try:
        fn(*args)
    except Exception as error:  # the type is what is compared
        return type(error)
    return None


@pytest.mark.parametrize("shape", [(0,), (0, 3)])
@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_scatter_into_an_empty_tensor_raises_like_eager(name: str, shape: tuple[int, ...]) -> None:
    fn = SCATTERS[name]
    x, index = torch.zeros(shape), torch.tensor([7, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # index_reduce is in beta
        expected = _error(fn, x, index)  # mostly an IndexError or RuntimeError; 2-d index_add passes
        assert _error(frontend.compile(fn, dynamic=False), x, index) is expected
