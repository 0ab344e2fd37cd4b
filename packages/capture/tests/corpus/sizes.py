"""torch.Size arithmetic, shape unpacking, size()/dim()/numel() and shape-driven reshapes."""

from __future__ import annotations

import math

import torch

from ._registry import program, x, xy

F = "sizes"


@program(F, x(2, 3, 4))
def shape_unpack_reshape(a: torch.Tensor) -> torch.Tensor:
    b, s, h = a.shape
    return a.reshape(b * s, h)


@program(F, x(2, 3, 4))
def size_tuple_concat(a: torch.Tensor) -> torch.Tensor:
    new_shape = a.shape[:-1] + (2, 2)
    return a.view(new_shape)


@program(F, x(2, 6))
def size_index_arithmetic(a: torch.Tensor) -> torch.Tensor:
    return a.view(a.size(0), 2, a.size(-1) // 2).sum(1)


@program(F, x(3, 4))
def numel_and_dim(a: torch.Tensor) -> torch.Tensor:
    return a.flatten() * (a.numel() + a.dim())


@program(F, x(2, 3, 4))
def size_prod(a: torch.Tensor) -> torch.Tensor:
    return a.reshape(math.prod(a.shape[1:]), a.shape[0])


@program(F, x(2, 3, 4))
def torch_size_constructor(a: torch.Tensor) -> torch.Tensor:
    shape = torch.Size([a.shape[0], -1])
    return a.reshape(shape)


@program(F, xy((2, 3), (3, 5)))
def shapes_for_new_tensor(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.ones(a.shape[0], b.shape[1])
    return out + a @ b


@program(F, x(4, 6))
def size_comparison_branch(a: torch.Tensor) -> torch.Tensor:
    if a.shape[0] < a.shape[1]:
        return a.t()
    return a


@program(F, x(2, 3, 4))
def negative_dims(a: torch.Tensor) -> torch.Tensor:
    return a.permute(*range(a.dim() - 1, -1, -1)).contiguous()


@program(F, x(2, 8))
def size_len_and_list(a: torch.Tensor) -> torch.Tensor:
    dims = list(a.shape)
    dims[-1] //= 4
    dims.append(4)
    return a.reshape(dims) * len(dims)


@program(F, x(2, 3))
def expand_with_sizes(a: torch.Tensor) -> torch.Tensor:
    return a.unsqueeze(0).expand(4, *a.shape) + 1


@program(F, x(6, 4))
def split_by_computed_size(a: torch.Tensor) -> torch.Tensor:
    first, second = a.split(a.shape[0] // 2, dim=0)
    return first * second


@program(F, x(2, 3, 4))
def size_equality(a: torch.Tensor) -> torch.Tensor:
    if a.shape == torch.Size([2, 3, 4]) and a.shape[1:] == (3, 4):
        return a.sum()
    return a.mean()


@program(F, x(4, 4))
def stride_and_contiguity(a: torch.Tensor) -> torch.Tensor:
    t = a.t()
    if t.stride(0) == 1:
        return t.contiguous() * 2
    return t


@program(F, x(3, 5))
def new_full_from_shape(a: torch.Tensor) -> torch.Tensor:
    return a + a.new_full(a.shape, float(a.shape[1]))


@program(F, x(5, 3))
def shape_in_fstring_free_math(a: torch.Tensor) -> torch.Tensor:
    scale = 1.0 / math.sqrt(a.shape[-1])
    return a * scale


# torch.Size values in the region: `shape` is a torch.Size, not a tuple.
@program(F, x(2, 3, 4))
def shape_is_torch_size(a: torch.Tensor) -> torch.Tensor:
    s = a.shape
    return a * float(isinstance(s, torch.Size)) + float(isinstance(a.size(), torch.Size))


@program(F, x(2, 3, 4))
def shape_numel_method(a: torch.Tensor) -> torch.Tensor:
    s = a.shape
    return a.reshape(-1) / s.numel()


@program(F, x(2, 3, 4))
def shape_slice_is_size(a: torch.Tensor) -> torch.Tensor:
    tail = a.shape[1:]
    return a.new_ones(tail) * tail.numel() + float(isinstance(tail, torch.Size))


@program(F, x(2, 3, 4))
def shape_plus_tuple_view(a: torch.Tensor) -> torch.Tensor:
    s = a.shape[:-1] + (2, 2)
    return a.view(s) * float(isinstance(s, torch.Size))


@program(F, x(2, 3, 4))
def tuple_plus_shape_reshape(a: torch.Tensor) -> torch.Tensor:
    s = (1,) + a.shape
    return a.reshape(s).sum(0) * float(isinstance(s, torch.Size))


@program(F, x(3, 4))
def shape_index_count_len(a: torch.Tensor) -> torch.Tensor:
    s = a.shape
    return a * (s.index(4) + s.count(3) + len(s))


@program(F, x(3, 4))
def shape_iteration_and_equality(a: torch.Tensor) -> torch.Tensor:
    total = 0
    for n in a.shape:
        total += n
    same = a.shape == (3, 4) and a.size() == torch.Size([3, 4])
    return a * total if same else a


@program(F, xy((2, 3), (3, 2)))
def torch_size_of_other_shape(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    size = torch.Size([b.shape[1], b.shape[0]])
    return a.new_zeros(size) + a + size.numel()
