"""Large index_put written in place into a fresh copy, and tied embeddings' gradients folded into it."""

from __future__ import annotations

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rewritten
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.lowering.scatter import DENSE_SCATTER_LIMIT
from inductor_ir.scheduler import ExternStep

aten = torch.ops.aten
ROWS, WIDTH, BATCH, TOKENS = 512, 64, 4, 40  # rows * width * tokens exceeds DENSE_SCATTER_LIMIT


def _tied_gradient(lhs: torch.Tensor, rhs: torch.Tensor, grad: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    # An output projection's weight gradient (transposed matmul) plus the input embedding's.
    return torch.mm(rhs.t(), lhs).t() + aten.embedding_dense_backward(grad, ids, ROWS, -1, False)


def _inputs() -> list[torch.Tensor]:
    ids = torch.randint(0, ROWS, (BATCH, TOKENS))
    ids[0, :5] = 3  # repeated rows accumulate
    return [torch.randn(BATCH * TOKENS, ROWS), torch.randn(BATCH * TOKENS, WIDTH), torch.randn(BATCH, TOKENS, WIDTH), ids]


def _externs(program: inductor_ir.Program, op: object) -> list[inductor_ir.ExternKernel]:
    return [b for b in program.buffers if isinstance(b, inductor_ir.ExternKernel) and b.op is op]


def test_tied_embedding_gradient_accumulates_into_the_other_gradient() -> None:
    assert ROWS * WIDTH * BATCH * TOKENS > DENSE_SCATTER_LIMIT
    torch.manual_seed(0)
    example = _inputs()
    program = inductor_ir.lower(rewritten(make_fx(_tied_gradient)(*example)), example)
    # No zero-filled table and no add: ATen's index_put_ writes into a copy of the matmul's result.
    assert not _externs(program, aten.embedding_dense_backward.default)
    (accumulate,) = _externs(program, aten.index_put_.default)
    assert isinstance(accumulate.args[0], inductor_ir.ComputedBuffer)
    fresh = _inputs()
    before = [t.clone() for t in fresh]
    assert_close(inductor_ir.interpret(program, fresh), [_tied_gradient(*fresh)])
    for got, want in zip(fresh, before):
        assert torch.equal(got, want)  # no input was written


def test_in_place_index_put_is_no_barrier_for_the_schedule() -> None:
    # A mutating call normally orders everything around it (its reads may alias anything); one
    # writing only its own fresh copy does not, so buffers dead before it are freed before it.
    def fn(lhs: torch.Tensor, rhs: torch.Tensor, grad: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        other = torch.mm(torch.mm(lhs.t(), lhs).exp(), lhs.t())  # an intermediate that dies early
        return _tied_gradient(lhs, rhs, grad, ids), other

    torch.manual_seed(0)
    example = _inputs()
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": ReferenceBackend()})
    steps = compiled.schedule.steps
    (position,) = [
        k for k, s in enumerate(steps) if isinstance(s, ExternStep) and getattr(s.buffer, "op", None) is aten.index_put_.default
    ]
    accumulate = steps[position].buffer
    frees = compiled.schedule.memory.steps[position].frees
    assert set(frees) <= set(accumulate.read_names()), frees
    fresh = _inputs()
    assert_close(compiled(*fresh), list(fn(*fresh)))


def test_huge_index_put_writes_a_copy_and_leaves_its_input_alone() -> None:
    rows = DENSE_SCATTER_LIMIT // 64 + 1
    x, index, values = torch.randn(rows, 8), torch.randint(0, rows, (8,)), torch.randn(8, 8)
    fn = lambda x, i, v: torch.ops.aten.index_put(x, [i], v, True)  # noqa: E731
    compiled = inductor_ir.compile_graph(make_fx(fn)(x, index, values), [x, index, values], backends={"cpu": ReferenceBackend()})
    assert _externs(compiled.program, aten.index_put_.default)
    original = x.clone()
    assert_close(compiled(x, index, values), [fn(original, index, values)])
    assert torch.equal(x, original)


@pytest.mark.parametrize("padding_idx, scale", [(0, False), (-1, True)])
def test_embedding_gradient_with_padding_or_frequency_scaling_is_not_folded(padding_idx: int, scale: bool) -> None:
    def fn(lhs: torch.Tensor, rhs: torch.Tensor, grad: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return torch.mm(rhs.t(), lhs).t() + aten.embedding_dense_backward(grad, ids, ROWS, padding_idx, scale)

    torch.manual_seed(0)
    example = _inputs()
    program = inductor_ir.lower(rewritten(make_fx(fn)(*example)), example)
    assert _externs(program, aten.embedding_dense_backward.default)
    fresh = _inputs()
    assert_close(inductor_ir.interpret(program, fresh), [fn(*fresh)])


def test_tied_embedding_model_trains_like_eager() -> None:
    aotgrad = pytest.importorskip("aotgrad")
    torch.manual_seed(0)
    table = torch.randn(ROWS, WIDTH, requires_grad=True)

    def fn(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        hidden = torch.nn.functional.embedding(ids, weight).tanh()
        return torch.nn.functional.linear(hidden, weight).logsumexp(-1).sum()  # tied output projection

    programs: list[inductor_ir.Program] = []

    def compiler(gm: torch.fx.GraphModule, example: list[torch.Tensor]) -> object:
        program = inductor_ir.lower(rewritten(gm), example)
        programs.append(program)
        return lambda *args: inductor_ir.interpret(program, list(args))

    compiled = aotgrad.aot_function(
        fn, fw_compiler=compiler, bw_compiler=compiler, decompositions=inductor_ir.decompositions(),
        config=aotgrad.AotConfig(fallback_to_eager=False),
    )
    ids = torch.randint(0, ROWS, (BATCH, TOKENS))
    weight = table.detach().clone().requires_grad_(True)
    compiled(ids, weight).backward()
    fn(ids, table).backward()
    assert_close(weight.grad, table.grad)
    assert _externs(programs[-1], aten.index_put_.default)
    assert not _externs(programs[-1], aten.embedding_dense_backward.default)
