"""Compiled functions called under torch.func transforms (vmap, grad, jacrev) or a user's torch
function / dispatch mode give eager's results.

Under a transform the arguments are functorch's wrapper tensors: a compiled entry's kernels cannot
read them (vmap after an ordinary call raised "Cannot access data pointer"), and capturing them
returned a FakeTensor from vmap. The function runs as eager under the transform.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

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


class _DoubledRelu(TorchFunctionMode):
    """A user's function mode that changes what an op computes."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        return result * 2 if func is torch.Tensor.relu else result


class _CountOps(TorchDispatchMode):
    """A user's dispatch mode that watches every ATen op (as FLOP counters and loggers do)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_user_modes_see_what_eager_shows_them() -> None:
    """Under a user's TorchFunctionMode or TorchDispatchMode the function runs as eager (the
    compiled kernels would bypass the mode); `with torch.device(...)` keeps the compiled path."""
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(1))
    w = torch.randn(3, 5, generator=torch.Generator().manual_seed(2))
    compiled = frontend.compile(layer)
    torch.testing.assert_close(compiled(x, w), layer(x, w))  # an entry exists: the modes must not use it
    with _DoubledRelu():
        expected = layer(x, w)
    with _DoubledRelu():
        torch.testing.assert_close(compiled(x, w), expected)
    with _CountOps() as eager_ops:
        expected = layer(x, w)
    with _CountOps() as compiled_ops:
        actual = compiled(x, w)
    torch.testing.assert_close(actual, expected)
    assert compiled_ops.ops == eager_ops.ops
    with torch.device("cpu"):
        torch.testing.assert_close(compiled(x, w), layer(x, w))
    frontend.reset()
