"""Sums and products over a few elements (a static count up to ``UNROLL_LIMIT``) are pointwise
expressions that fuse into their readers, as the gradient of keys and values shared by 4 heads of
grouped-query attention (a sum over the group) does into the rotary embedding's backward."""

from __future__ import annotations

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, check_interpret, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.lowering.reductions import UNROLL_LIMIT


def _reductions(program: inductor_ir.Program) -> list[str]:
    return [b.name for b in program.buffers if isinstance(b, inductor_ir.ComputedBuffer) and isinstance(b.data, inductor_ir.Reduction)]


def _grouped_gradient(grad: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    # (batch, kv_heads * group, seq, dim) -> sum over the group -> transposed, scaled: one kernel.
    b, h, s, d = grad.shape
    summed = grad.view(b, 2, h // 2, s, d).sum(2)
    return (summed * cos).transpose(1, 2).reshape(b, s, 2 * d)


def test_a_sum_over_a_group_of_heads_is_fused_into_its_reader() -> None:
    program = check_interpret(_grouped_gradient, lambda: [rand(2, 8, 6, 4), rand(6, 4)])
    assert _reductions(program) == []
    assert len([b for b in program.buffers if isinstance(b, inductor_ir.ComputedBuffer)]) == 1


@pytest.mark.parametrize("count", [2, UNROLL_LIMIT, UNROLL_LIMIT + 1])
def test_only_counts_up_to_the_limit_are_unrolled(count: int) -> None:
    program = check_interpret(lambda x: x.sum(1) + 1, lambda: [rand(5, count, 3)])
    assert bool(_reductions(program)) == (count > UNROLL_LIMIT)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int16, torch.bool])
def test_unrolled_sums_and_products_match_eager_in_every_dtype(dtype: torch.dtype) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.sum(1), x.sum((0, 2)), x.prod(2), x.sum(1, dtype=torch.float64)

    def make() -> list[torch.Tensor]:
        if dtype == torch.bool:
            return [torch.rand(3, 4, 2) > 0.5]
        if dtype == torch.int16:  # products and sums that wrap as eager's int64 accumulation does
            return [torch.randint(-300, 300, (3, 4, 2), dtype=dtype)]
        return [rand(3, 4, 2, dtype=dtype)]

    program = check_interpret(fn, make)
    assert _reductions(program) == []


def test_a_sum_of_negative_zeros_is_positive_zero_as_eager() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return 1.0 / (x * 0.0).sum(1)  # -inf for a -0.0 sum, inf for +0.0

    example = [-torch.rand(4, 3) - 1]
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": ReferenceBackend()})
    x = -torch.rand(4, 3) - 1
    (got,) = compiled.call([x])
    assert_close(got, fn(x))
    assert bool((got == float("inf")).all())
