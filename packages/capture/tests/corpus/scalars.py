"""Tensor.item(), tolist(), numpy calls and Python scalars from tensors: these must break cleanly."""

from __future__ import annotations

import numpy as np
import torch

from ._registry import args, ints, program, x

F = "scalars"


@program(F, x(4))
def item_used_in_python(a: torch.Tensor) -> torch.Tensor:
    m = a.max().item()
    return a / (abs(m) + 1)


@program(F, x(4))
def item_as_tensor_argument(a: torch.Tensor) -> torch.Tensor:
    s = a.sum().item()
    return torch.full_like(a, s) + a


@program(F, x(2, 3))
def tolist_loop(a: torch.Tensor) -> torch.Tensor:
    rows = a.tolist()
    total = sum(sum(r) for r in rows)
    return a + total


@program(F, args(lambda: ints(5, 3)))
def tolist_as_shape(sizes: torch.Tensor) -> torch.Tensor:
    dims = sizes.tolist()
    return torch.ones(dims) * 2


@program(F, x(4))
def float_of_tensor(a: torch.Tensor) -> torch.Tensor:
    return a * float(a.mean())


@program(F, x(4))
def int_of_tensor_index(a: torch.Tensor) -> torch.Tensor:
    i = int(a.argmax())
    return a[i] * a


@program(F, x(4))
def numpy_roundtrip(a: torch.Tensor) -> torch.Tensor:
    arr = a.numpy() * 2
    return torch.from_numpy(arr) + 1


@program(F, x(4))
def numpy_function_on_tensor(a: torch.Tensor) -> torch.Tensor:
    s = np.sum(a.numpy())
    return a - float(s)


@program(F, x(4))
def numpy_constants_only(a: torch.Tensor) -> torch.Tensor:
    k = float(np.sqrt(16.0))
    return a * k


@program(F, x(4))
def bool_of_tensor_scalar(a: torch.Tensor) -> torch.Tensor:
    return a * 2 if bool(a.sum() > 0) else a * 3


@program(F, x(4))
def item_then_more_tensor_work(a: torch.Tensor) -> torch.Tensor:
    b = a.sin() * 2
    k = b.sum().item()
    c = b.cos() + k
    return c.relu()


@program(F, x(5))
def tensor_to_python_list_len(a: torch.Tensor) -> torch.Tensor:
    n = len(a.tolist())
    return a * n
