"""scatter / scatter_add / scatter_reduce / index_put / index_add lowered as dense gathers, vs eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, check_interpret
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.lowering.scatter import DENSE_SCATTER_LIMIT


def _distinct(n: int, high: int) -> torch.Tensor:
    return torch.randperm(high)[:n]


def test_scatter_add_with_duplicates_and_a_narrower_index() -> None:
    def inputs() -> list[torch.Tensor]:
        # index is smaller than x and src in every dim; duplicates add up
        return [torch.randn(5, 6), torch.randint(0, 5, (3, 4)), torch.randn(4, 5)]

    check_interpret(lambda x, i, s: torch.scatter_add(x, 0, i, s), inputs)
    check_interpret(lambda x, i, s: torch.scatter_add(x, 1, i.remainder(6), s), inputs)


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce: str, include_self: bool) -> None:
    def fn(x: torch.Tensor, i: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return x.scatter_reduce(1, i, s, reduce, include_self=include_self)

    check_interpret(fn, lambda: [torch.randn(4, 7), torch.randint(0, 7, (4, 9)), torch.randn(4, 9)])


def test_scatter_without_duplicates_src_and_value() -> None:
    def inputs() -> list[torch.Tensor]:
        index = torch.stack([_distinct(4, 8) for _ in range(3)])  # (3, 4): distinct per row
        return [torch.randn(3, 8), index, torch.randn(3, 5)]

    check_interpret(lambda x, i, s: (x.scatter(1, i, s), x.scatter(1, i, 2.5)), inputs)


def test_scatter_duplicates_last_write_wins_as_on_cpu() -> None:
    x, src = torch.randn(6), torch.randn(5)
    index = torch.tensor([1, 3, 1, 5, 3])
    fn = lambda x, i, s: x.scatter(0, i, s)  # noqa: E731
    program = inductor_ir.lower(make_fx(fn)(x, index, src), [x, index, src])
    actual = inductor_ir.interpret(program, [x, index, src])[0]
    expected = x.clone()
    for position, value in zip(index.tolist(), src.tolist()):
        expected[position] = value  # serial: the later source overwrites
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_index_put_accumulate_with_duplicates(dtype: torch.dtype) -> None:
    def inputs() -> list[torch.Tensor]:
        values = torch.randn(7, 3) if dtype.is_floating_point else torch.randint(-9, 9, (7, 3))
        x = torch.randn(5, 3) if dtype.is_floating_point else torch.randint(-9, 9, (5, 3))
        return [x.to(dtype), torch.tensor([0, 4, 0, -1, 2, 2, 0]), values.to(dtype)]

    check_interpret(lambda x, i, v: torch.ops.aten.index_put(x, [i], v, True), inputs)


def test_index_put_forms() -> None:
    def inputs() -> list[torch.Tensor]:
        rows = _distinct(3, 5)
        return [torch.randn(5, 4, 6), rows, _distinct(3, 6), torch.randn(3, 4), torch.randn(())]

    def fn(x: torch.Tensor, r: torch.Tensor, c: torch.Tensor, v: torch.Tensor, s: torch.Tensor) -> Any:
        return (
            torch.ops.aten.index_put(x, [r], v[:, :, None]),  # leading index, broadcast values
            torch.ops.aten.index_put(x, [r, None, c], v, True),  # non-adjacent indices
            torch.ops.aten.index_put(x, [None, None, c], s),  # trailing index, scalar value
        )

    check_interpret(fn, inputs)


def test_index_add_and_backward_of_indexing() -> None:
    def inputs() -> list[torch.Tensor]:
        return [torch.randn(6, 5), torch.randint(0, 6, (8,)), torch.randn(8, 5)]

    check_interpret(lambda x, i, s: (x.index_add(0, i, s), x.index_add(0, i, s, alpha=-2.0)), inputs)

    # gather's and indexing's gradients are scatter_add / index_put(accumulate): through the reference backend
    def grads(x: torch.Tensor, i: torch.Tensor, g: torch.Tensor) -> Any:
        x = x.detach().requires_grad_(True)
        out = torch.gather(x, 1, i) * 2 + x[i[:, 0].remainder(4)].sum(1, keepdim=True)
        return torch.autograd.grad(out, x, g)

    example = [torch.randn(4, 5), torch.randint(0, 5, (4, 3)), torch.randn(4, 3)]
    gm = make_fx(grads, decomposition_table=inductor_ir.decompositions())(*example)
    program = inductor_ir.lower(gm, example)
    assert not [b for b in program.buffers if type(b) is inductor_ir.FallbackKernel]
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": ReferenceBackend()})
    fresh = [torch.randn(4, 5), torch.randint(0, 5, (4, 3)), torch.randn(4, 3)]
    assert_close(compiled(*fresh), grads(*fresh))


def test_huge_scatter_falls_back_to_aten() -> None:
    rows = DENSE_SCATTER_LIMIT // 64 + 1
    x, index, values = torch.randn(rows, 8), torch.randint(0, rows, (8,)), torch.randn(8, 8)
    fn = lambda x, i, v: torch.ops.aten.index_put(x, [i], v, True)  # noqa: E731
    program = inductor_ir.lower(make_fx(fn)(x, index, values), [x, index, values])
    # ATen's index_put_ writing into a copy of x (see test_accumulate_in_place.py).
    assert [b for b in program.buffers if isinstance(b, inductor_ir.ExternKernel)]
    torch.testing.assert_close(inductor_ir.interpret(program, [x, index, values])[0], fn(x, index, values))


def test_index_put_with_a_boolean_mask() -> None:
    mask = torch.rand(4, 5) > 0.5  # fixed: the values' length is the number of set elements

    def inputs() -> list[torch.Tensor]:
        return [torch.randn(3, 4, 5, 6), mask.clone(), torch.randn(int(mask.sum()), 6), torch.randn(())]

    def fn(x: torch.Tensor, m: torch.Tensor, v: torch.Tensor, s: torch.Tensor) -> Any:
        return (
            torch.ops.aten.index_put(x, [None, m], v),  # k-th set element takes v[k]
            torch.ops.aten.index_put(x, [None, m], s, True),
            torch.ops.aten.index_put(x, [None, m], v[:1], True),
        )

    check_interpret(fn, inputs)


@pytest.mark.filterwarnings("ignore:index_reduce")
def test_put_index_add_and_index_reduce() -> None:
    def inputs() -> list[torch.Tensor]:
        return [torch.randn(4, 5), torch.randint(-20, 20, (2, 3)), torch.randn(6), torch.randint(0, 4, (7,)), torch.randn(7, 5)]

    def fn(x: torch.Tensor, flat: torch.Tensor, src: torch.Tensor, rows: torch.Tensor, v: torch.Tensor) -> Any:
        return (
            x.put(flat, src.reshape(2, 3), accumulate=True),
            x.put(flat[0, :1], src[:1]),
            x.index_reduce(0, rows, v, "mean"),
            x.index_reduce(0, rows, v, "amax", include_self=False),
            torch.scatter_reduce(x, 0, rows[:4, None].expand(4, 5), v[:4], "mean", include_self=False),
        )

    check_interpret(fn, inputs)


def _sums_into_x_from_cancelling_sources(x: torch.Tensor, rows: torch.Tensor, src: torch.Tensor) -> Any:
    index = rows.view(1, -1).expand(x.size(0), -1)
    return (
        x.index_add(1, rows, src),
        x.index_add(1, rows, src, alpha=2),
        x.scatter_add(1, index, src),
        x.scatter_reduce(1, index, src, "sum"),
        x.t().index_put((rows,), src.t(), accumulate=True),
        x.put(rows + 3, src[0], accumulate=True),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_sums_into_x_add_the_sources_in_eagers_order(dtype: torch.dtype) -> None:
    # fuzz e37ff28a49: eager adds the sources into x one by one, so x + 1e30 - 1e30 is 0; adding the
    # sources' sum (0) to x at the end kept x
    rows = torch.tensor([0, 2, 0, 1, 2, 1, 0])
    big = torch.tensor([1e30, -1e30, -1e30, 1e30, 1e30, -1e30, 0.0])

    def inputs() -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(11)
        x = torch.randn(2, 3, generator=g).to(dtype)
        src = (big + torch.randn(2, 7, generator=g)).to(dtype)
        return [x, rows, src]

    check_interpret(_sums_into_x_from_cancelling_sources, inputs)


def test_masked_scatter() -> None:
    def inputs() -> list[torch.Tensor]:
        return [torch.randn(4, 6), torch.rand(4, 6) > 0.5, torch.randn(5, 5), torch.rand(6) > 0.3]

    check_interpret(lambda x, m, s, row: (x.masked_scatter(m, s), x.masked_scatter(row, s)), inputs)
