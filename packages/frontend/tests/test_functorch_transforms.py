"""Compiled functions called under torch.func transforms (vmap, grad, jacrev) give eager's results.

Under a transform the arguments are functorch's wrapper tensors: a compiled entry's kernels cannot
read them (vmap after an ordinary call raised "Cannot access data pointer"), and capturing them
returned a FakeTensor from vmap. The function runs as eager under the transform.
"""

from __future__ import annotations

import pytest
import torch

import frontend


def layer(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (x @ w).relu().sum(-1) * 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
@pytest.mark.parametrize("compiled_first", [False, True], ids=["cold", "after_a_compiled_call"])
def test_transforms_of_a_compiled_function(backend: str, compiled_first: bool) -> None:
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(5, 3, 4, generator=g), torch.randn(4, 6, generator=g)
    compiled = frontend.compile(layer, backend=backend)
    if compiled_first:
        torch.testing.assert_close(compiled(x[0], w), layer(x[0], w))
    batched = torch.vmap(compiled, in_dims=(0, None))(x, w)
    assert type(batched) is torch.Tensor
    torch.testing.assert_close(batched, torch.vmap(layer, in_dims=(0, None))(x, w))
    grad = torch.func.grad(lambda w: compiled(x[0], w).sum())(w)
    torch.testing.assert_close(grad, torch.func.grad(lambda w: layer(x[0], w).sum())(w))
    jacobian = torch.func.jacrev(lambda w: compiled(x[1], w))(w)
    torch.testing.assert_close(jacobian, torch.func.jacrev(lambda w: layer(x[1], w))(w))
    torch.testing.assert_close(compiled(x[2], w), layer(x[2], w))  # and outside them, compiled again
    frontend.reset()
