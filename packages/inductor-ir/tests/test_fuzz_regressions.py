"""Programs the differential fuzzer (tools/fuzz/) found compiled wrong, shrunk to ATen graphs:
each is traced with this package's decompositions, compiled through the scheduler (the reference
backend) and compared with eager on seeded inputs."""

from __future__ import annotations

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


def _large_eye(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # torch's decomposition ranges over uint16 from 256 rows on: a dtype CPU arange lacks.
    return x * torch.eye(x.size(0), x.size(1), dtype=torch.float16), torch.eye(300, dtype=torch.int32)[::37]


def test_eye_of_256_rows_and_more_matches_eager() -> None:
    x = torch.randint(-10, 10, (256, 3), generator=torch.Generator().manual_seed(5))
    gm = make_fx(_large_eye, decomposition_table=inductor_ir.decompositions())(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    assert_close(compiled(x), _large_eye(x))


def _flip_of_stepped_scatter(t: torch.Tensor) -> torch.Tensor:
    # The gradient of x.flip(0)[::2]: row 6 - i reads row (6 - i) // 2 of t where 6 - i is even.
    zeros = torch.zeros(7, 3)
    return torch.ops.aten.slice_scatter(zeros, t, 0, 0, 7, 2).flip(0)


def test_flip_of_a_stepped_slice_scatter_matches_eager() -> None:
    t = torch.randn(4, 3, generator=torch.Generator().manual_seed(6))
    gm = make_fx(_flip_of_stepped_scatter, decomposition_table=inductor_ir.decompositions())(t)
    compiled = inductor_ir.compile_graph(gm, [t], backends={"cpu": ReferenceBackend()})
    assert_close(compiled(t), _flip_of_stepped_scatter(t))


def _linear_upsample(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    interpolate = torch.nn.functional.interpolate
    return interpolate(x, size=3, mode="linear"), interpolate(x, size=7, mode="linear", align_corners=True)


def test_linear_upsampling_of_an_infinite_edge_pixel_matches_eager() -> None:
    # torch's decomposition blends v1 + (v2 - v1) * a: nan where both neighbours are the same inf pixel
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(7))
    x[0, 0, -1], x[1, 2, -1], x[1, 1, 0] = float("inf"), float("-inf"), float("inf")
    gm = make_fx(_linear_upsample, decomposition_table=inductor_ir.decompositions())(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    assert_close(compiled(x), _linear_upsample(x))


def _norms_of_one_element(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    vector_norm = torch.linalg.vector_norm
    return (
        vector_norm(x, dim=0),
        vector_norm(x, ord=3, dim=-2, keepdim=True),
        vector_norm(x, ord=0, dim=0),
        vector_norm(x[:, :1]),
        vector_norm(x, dim=1),  # a real reduction: x * x overflows to inf, as in eager
    )


def test_a_norm_of_one_element_is_its_absolute_value() -> None:
    # fuzz 3e2164ec6d: F.normalize over a dim of size 1 gave 0 (sqrt(x * x) overflowed) where eager gives 1
    x = torch.tensor([[2e29, -3e30, 0.0, 1.5]])
    gm = make_fx(_norms_of_one_element, decomposition_table=inductor_ir.decompositions())(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    assert_close(compiled(x), _norms_of_one_element(x))


def _logical_ops_of_mixed_dtypes(big: torch.Tensor, narrow: torch.Tensor, tiny: torch.Tensor, half: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        torch.logical_xor(big, narrow),  # both dimensioned: tested in int64
        torch.logical_and(big.sum(), narrow),  # a 0-d int64 512: 0 in int8
        torch.logical_or(tiny, half),  # tiny rounds to 0 in float16
    )


def test_logical_ops_test_each_operand_in_the_promoted_dtype() -> None:
    # fuzz a37247c604: logical_xor of an int64 product (a multiple of 2**16) and an int16 tensor
    big = torch.tensor([256, 0, 512, -256])
    narrow = torch.tensor([1, 0, -2, 5], dtype=torch.int8)
    tiny, half = torch.tensor([1e-50, 1.0, 0.0, 1e-50], dtype=torch.float64), torch.tensor([0.0, 0.0, 1.0, 2.0], dtype=torch.float16)
    args = [big, narrow, tiny[:1].reshape(()), half]
    gm = make_fx(_logical_ops_of_mixed_dtypes, decomposition_table=inductor_ir.decompositions())(*args)
    compiled = inductor_ir.compile_graph(gm, args, backends={"cpu": ReferenceBackend()})
    assert_close(compiled(*args), _logical_ops_of_mixed_dtypes(*args))


def _strided_reads_and_writes_of_a_flip(x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    flipped = x.flip(-1)  # eager keeps x's transposed strides
    window = flipped.as_strided((1, 3), (1, 3), 1) * 1
    written = torch.ops.aten.as_strided_scatter(flipped, v.expand(1, 3), (1, 3), (1, 3), 1)
    return window, written


def test_as_strided_of_an_intermediate_reads_eagers_memory_layout() -> None:
    # fuzz 66517ad41e: a write into a view of a flipped transposed tensor landed on other elements
    x = torch.randn(3, 3, generator=torch.Generator().manual_seed(8)).t()
    v = torch.randn(1)
    gm = make_fx(_strided_reads_and_writes_of_a_flip, decomposition_table=inductor_ir.decompositions())(x, v)
    compiled = inductor_ir.compile_graph(gm, [x, v], backends={"cpu": ReferenceBackend()})
    assert_close(compiled(x, v), _strided_reads_and_writes_of_a_flip(x, v))


def _cats_of_many_parts(x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The gradient of x.split(1, 1)[-1] (zeros for every unused column), the columns of x in reverse
    # order, and columns computed one by one.
    split_gradient = torch.cat([*(torch.zeros(4, 1) for _ in range(x.size(1) - 1)), g], 1)
    reversed_columns = torch.cat(list(x.split(1, 1))[::-1], 1).sin()
    computed = torch.cat([x[:, i : i + 1] * (i % 5) for i in range(100)], 1)
    # fuzz b2a63fb87d: a 64-step recurrence's gradient, 64 parts each a computation of its own step
    steps = torch.cat([torch.sigmoid(x[:, i : i + 1]) * (1 - x[:, i + 1 : i + 2]) for i in range(64)], 1)
    return split_gradient, reversed_columns, computed, steps


def test_a_cat_of_a_thousand_parts_reads_a_bounded_number_of_them_per_kernel() -> None:
    # Each element of a masked cat selects among all its parts: one kernel of 2,053 masked loads
    # kept the C++ compiler busy for minutes. Runs of zeros become one part; on CPU past
    # MAX_CPU_CAT_PARTS parts, each is stored and ATen's cat copies them.
    from inductor_ir.lowering.indexing import MAX_CPU_CAT_PARTS

    x, g = torch.randn(4, 1000, generator=torch.Generator().manual_seed(8)), torch.randn(4, 1)
    gm = make_fx(_cats_of_many_parts, decomposition_table=inductor_ir.decompositions())(x, g)
    compiled = inductor_ir.compile_graph(gm, [x, g], backends={"cpu": ReferenceBackend()})
    assert_close(compiled(x, g), _cats_of_many_parts(x, g))
    masked = [s.source.count("ops.masked(") for s in compiled.sources]
    assert max(masked) <= MAX_CPU_CAT_PARTS, masked


def _max_pools(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    pool = torch.ops.aten.max_pool2d_with_indices.default
    return (
        *pool(x, [3, 3], [2, 2], [0, 0], [1, 1], True),
        *pool(x, [3, 3], [2, 2], [1, 1], [1, 1], False),
        *pool(x, [2, 3], [1, 2], [1, 1], [2, 1], True),
    )


def test_max_pool_indices_of_nan_and_infinite_windows_are_eagers() -> None:
    # Eager scans a window from its first element inside the input and takes an element that is
    # greater or NaN: the last NaN wins (Kiln took the first, so the gradient went elsewhere), and a
    # window of padding and -inf points at its first element inside (Kiln: at the padding).
    x = torch.randn(2, 3, 5, 6, generator=torch.Generator().manual_seed(11))
    draw = torch.rand(x.shape, generator=torch.Generator().manual_seed(12))
    x[draw < 0.3] = float("nan")
    x[(draw >= 0.3) & (draw < 0.6)] = float("-inf")
    x[1, 2] = float("-inf")
    gm = make_fx(_max_pools)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    for i, (got, want) in enumerate(zip(compiled(x), _max_pools(x))):
        torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m, i=i: f"output {i}: {m}")


def _scatter_add_of_views_of_empty(index: torch.Tensor, values: torch.Tensor, ramp: torch.Tensor) -> torch.Tensor:
    # A gather's backward over a (1, 0, 1, 2) tensor: views between [0] and [1, 0, 1, 1] index by
    # `// 0` and `% 0`, which no element ever computes.
    flat = (values * ramp).view(1, 0, 1, 1).view(0).view(1, 0, 1, 1)
    return torch.ops.aten.scatter_add(values.new_zeros(1, 0, 1, 2), 1, index, flat)


def test_views_through_an_empty_dim_compile() -> None:
    """fuzz 41d49fedda: the backward of a gather over a (1, 0, 1, 2) tensor failed to compile:
    ZeroDivisionError from `ModularIndexing(i, 1, 0)` of the empty dim."""
    index = torch.zeros(1, 0, 1, 1, dtype=torch.int64)
    values, ramp = torch.randn(0), torch.arange(0)
    gm = make_fx(_scatter_add_of_views_of_empty, decomposition_table=inductor_ir.decompositions())(index, values, ramp)
    compiled = inductor_ir.compile_graph(gm, [index, values, ramp], backends={"cpu": ReferenceBackend()})
    assert_close(compiled(index, values, ramp), _scatter_add_of_views_of_empty(index, values, ramp))
