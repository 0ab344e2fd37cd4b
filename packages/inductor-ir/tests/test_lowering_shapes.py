"""Reductions, views, indexing, creation and random lowerings against eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from inductor_ir_testing import check_interpret, rand

import inductor_ir


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_reductions(dtype: torch.dtype, layout: str) -> None:
    def fn(x: torch.Tensor) -> Any:
        return (x.sum(1), x.sum(), x.mean(0, keepdim=True), x.amax(1), x.amin(0), x.argmax(1), x.argmin(),
                x.max(1), x.prod(0), torch.var(x, 1), torch.var_mean(x, 0, correction=0), (x > 0).any(1),
                (x > -3).all())  # fmt: skip

    check_interpret(fn, lambda: [rand(6, 9, dtype=dtype, layout=layout)])


def test_integer_and_bool_reductions() -> None:
    def fn(i: torch.Tensor, b: torch.Tensor) -> Any:
        return i.sum(1), i.amax(0), i.argmax(1), b.sum(0), b.any(), i.prod(1)

    check_interpret(fn, lambda: [rand(4, 5, dtype=torch.int64), rand(4, 5, dtype=torch.bool)])


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_and_log_softmax(dim: int) -> None:
    check_interpret(lambda x: (torch.softmax(x, dim), torch.log_softmax(x, dim)), lambda: [rand(5, 7)])


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_views(layout: str) -> None:
    def fn(x: torch.Tensor) -> Any:
        return (x.reshape(-1) * 2, x.t() + 1, x[1:4:2, ::2] * 3, x[:, 2] + x[3, :6], x.expand(2, 6, 8) + 1,
                x.unsqueeze(1).squeeze(1) - 1, x.permute(1, 0).reshape(4, 12).sin(), x.view(3, 2, 8).sum(1),
                torch.as_strided(x.contiguous() + 1, (3, 3), (2, 1), 1), x.split(3)[1] * 2, x.unbind(0)[2] + 0)  # fmt: skip

    check_interpret(fn, lambda: [rand(6, 8, layout=layout)])


def test_cat_and_pad() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> Any:
        return (torch.cat([a, b.t(), a * 2], 1), torch.cat([a, a], 0).sum(0), F.pad(a, (1, 2, 3, -1), value=5.0),
                F.pad(a.int(), (2, 2)))  # fmt: skip

    check_interpret(fn, lambda: [rand(6, 8), rand(8, 6)])


def test_indexing() -> None:
    def fn(w: torch.Tensor, i: torch.Tensor) -> Any:
        j = i.clamp(0, 4)
        return (F.embedding(i, w), w[i, 1:3], w[:, j[0]], torch.gather(w, 0, j[:, :3]), torch.index_select(w, 1, j[0]),
                w[i.clamp(-10, 9) - 10], w[j, (j + 1).clamp(max=4)])  # fmt: skip

    check_interpret(fn, lambda: [rand(10, 5), torch.randint(0, 10, (3, 4))])


def test_creation() -> None:
    def fn(x: torch.Tensor) -> Any:
        return (torch.arange(6.0)[:, None] + torch.full((6, 8), 2.0) + x, torch.arange(2, 14, 3) * 1,
                torch.zeros_like(x) + torch.ones(8), torch.scalar_tensor(3.0) * x)  # fmt: skip

    check_interpret(fn, lambda: [rand(6, 8)])


def test_random_ops_are_seeded_and_distributed() -> None:
    def fn(x: torch.Tensor) -> Any:
        return torch.rand(200, 100) + x * 0, torch.randn(200, 100), F.dropout(x, 0.25, True)

    x = torch.randn(200, 100)
    program = inductor_ir.lower(torch.fx.experimental.proxy_tensor.make_fx(fn)(x), [x])
    torch.manual_seed(0)
    u, n, d = inductor_ir.interpret(program, [x])
    torch.manual_seed(0)
    u2, _, _ = inductor_ir.interpret(program, [x])
    assert torch.equal(u, u2)
    assert 0 <= float(u.min()) and float(u.max()) < 1 and abs(float(u.mean()) - 0.5) < 0.01
    assert abs(float(n.mean())) < 0.02 and abs(float(n.std()) - 1) < 0.02
    kept = d != 0
    assert abs(float(kept.float().mean()) - 0.75) < 0.02
    torch.testing.assert_close(d[kept], x[kept] / 0.75)


def test_fallback_runs_any_op_as_itself() -> None:
    def fn(x: torch.Tensor) -> Any:
        return torch.cumsum(x.sin(), 1) * 2, torch.sort(x, 1)[0] + 1, torch.mm(x, x.t())

    program = check_interpret(fn, lambda: [rand(4, 6)], allow_fallback=True)
    kinds = {type(b).__name__ for b in program.buffers}
    assert {"FallbackKernel", "ExternKernel", "MultiOutput"} <= kinds


def test_ir_prints_like_the_talk() -> None:
    x = rand(8, 16)
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda a: a.sin().cos())(x)
    text = str(inductor_ir.lower(gm, [x]))
    assert "def inner_fn_buf0(index):" in text
    assert "tmp1 = ops.sin(tmp0)" in text and "tmp2 = ops.cos(tmp1)" in text
    assert "ComputedBuffer(name='buf0', layout=Layout('cpu', float32, size=[8, 16], stride=[16, 1])" in text


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64, torch.bool])
def test_views_cat_and_indexing_keep_every_dtype(dtype: torch.dtype) -> None:
    def fn(x: torch.Tensor, i: torch.Tensor) -> Any:
        return (x.t().reshape(-1), x[1:, ::2].contiguous(), torch.cat([x, x.flip(0)], 1), x[i], x.expand(2, 5, 6).clone(),
                torch.where(x == x[0], x, x.flip(1)), F.pad(x, (1, 1)), torch.gather(x, 1, i[:, None].expand(4, 3)))  # fmt: skip

    check_interpret(fn, lambda: [rand(5, 6, dtype=dtype), torch.randint(0, 5, (4,))])


def test_program_check_rejects_a_broken_program() -> None:
    x = rand(16, 4)  # a sum over 16 rows: a reduction buffer, read by the add's buffer
    program = inductor_ir.lower(torch.fx.experimental.proxy_tensor.make_fx(lambda a: a.exp().sum(0) + 1)(x), [x])
    program.check()
    program.buffers.reverse()
    with pytest.raises(AssertionError, match="before it is defined"):
        program.check()


@pytest.mark.parametrize(("kernel", "stride", "padding", "ceil"), [(2, 2, 0, False), (3, 2, 1, False), (3, 2, 1, True), (2, 1, 0, True)])
def test_pooling(kernel: int, stride: int, padding: int, ceil: bool) -> None:
    def fn(x: torch.Tensor) -> Any:
        values, indices = F.max_pool2d(x, kernel, stride, padding, ceil_mode=ceil, return_indices=True)
        return (values, indices, F.avg_pool2d(x, kernel, stride, padding, ceil_mode=ceil),
                F.avg_pool2d(x, kernel, stride, padding, ceil_mode=ceil, count_include_pad=False))  # fmt: skip

    check_interpret(fn, lambda: [rand(2, 3, 7, 9)])


def test_scatter_into_slices_and_selects() -> None:
    def fn(x: torch.Tensor, s: torch.Tensor, r: torch.Tensor) -> Any:
        return (torch.slice_scatter(x, s, 1, 1, 7, 2), torch.select_scatter(x, r, 0, -2), torch.slice_scatter(x, s[:, :2], 1, 2, 4))

    check_interpret(fn, lambda: [rand(5, 8), rand(5, 3), rand(8)])
