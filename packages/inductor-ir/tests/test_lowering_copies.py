"""Lowerings that avoid copies: strided views of strided buffers, ATen's cat for values already in
memory, and the embedding gradient as one extern call. Each compares with eager on fresh inputs."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import sympy
import torch
from inductor_ir_testing import assert_close, check_interpret, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.lowering.views import view_strides

aten = torch.ops.aten


def _ints(values: tuple[sympy.Expr, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def _computed(program: inductor_ir.Program) -> list[inductor_ir.ComputedBuffer]:
    return [b for b in program.buffers if isinstance(b, inductor_ir.ComputedBuffer)]


def _externs(program: inductor_ir.Program, op: object) -> list[inductor_ir.ExternKernel]:
    return [b for b in program.buffers if isinstance(b, inductor_ir.ExternKernel) and b.op is op]


# ---------------------------------------------------------------- views of strided buffers


def _cpu_decision(test: Callable[..., None]) -> Callable[..., None]:
    """Mark a test that checks a CPU-only lowering choice (ATen's cat, the CPU attention kernel): the
    Triton backend's suite runs it on CPU tensors but makes no `gpu` copy of it."""
    test.cpu_only = True  # type: ignore[attr-defined]
    return test


def _random_strided(rng: random.Random) -> torch.Tensor:
    ndim = rng.randint(1, 4)
    shape = [rng.choice([1, 2, 3, 4, 6]) for _ in range(ndim)]
    base = torch.randn(*[n * rng.choice([1, 2]) for n in shape])
    order = list(range(ndim))
    rng.shuffle(order)
    return base.permute(order)[tuple(slice(0, None, rng.choice([1, 1, 2])) for _ in range(ndim))]


def _random_shape(rng: random.Random, numel: int) -> list[int]:
    factors, rest = [], numel
    while rest > 1:
        factor = rng.choice([p for p in range(2, rest + 1) if rest % p == 0][:3])
        factors.append(factor)
        rest //= factor
    for _ in range(rng.randint(0, 2)):
        factors.insert(rng.randint(0, len(factors)), 1)
    return factors or [1]


def test_view_strides_agree_with_torch_view() -> None:
    rng = random.Random(0)
    viewed = 0
    for _ in range(1500):
        x = _random_strided(rng)
        new = _random_shape(rng, x.numel())
        got = view_strides(*(tuple(sympy.Integer(v) for v in t) for t in (x.shape, x.stride(), new)))
        try:
            expected = x.view(new)
        except RuntimeError:
            expected = None
        assert (got is None) == (expected is None), (list(x.shape), x.stride(), new, got)
        if got is not None:
            view = torch.as_strided(x, new, [int(s) for s in got], x.storage_offset())
            assert torch.equal(view, expected)
            viewed += 1
    assert viewed > 500  # the cases exercise both answers


def test_view_strides_symbolic_sizes_are_left_to_index_arithmetic() -> None:
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    assert view_strides((s0, sympy.Integer(4)), (sympy.Integer(1), s0), (sympy.Integer(4), s0)) is None


def test_transposed_attention_output_views_without_copies() -> None:
    # SDPA's CPU output is (B, H, S, D) laid out as (B, S, H, D): a view of it, its transpose and the
    # (B*S, H*D) view a projection reads are all strided views of the one buffer.
    def fn(out: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        heads = out.view(4, 2, 8, 16).transpose(1, 2)
        return torch.mm(heads.reshape(32, 32), w)

    def inputs() -> list[torch.Tensor]:
        return [rand(4, 8, 2, 16).transpose(1, 2), rand(32, 5)]

    program = check_interpret(fn, inputs)
    assert not _computed(program), [b.name for b in _computed(program)]
    (mm,) = _externs(program, aten.mm.default)
    assert isinstance(mm.args[0], inductor_ir.ReinterpretView)
    assert _ints(mm.args[0].layout.stride) == (32, 1)


@_cpu_decision
def test_attention_reads_heads_of_a_fused_projection_in_place() -> None:
    # GPT-2: one (tokens, 3 * width) projection split into q, k, v, each viewed as heads.
    def fn(qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = (t.view(2, 8, 2, 8).transpose(1, 2) for t in qkv.view(2, 8, 48).split(16, dim=2))
        return aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, is_causal=True)[0]

    program = check_interpret(fn, lambda: [rand(16, 48)])
    assert not _computed(program)  # no copies: the attention call reads three strided views
    (attention,) = _externs(program, aten._scaled_dot_product_flash_attention_for_cpu.default)
    assert [_ints(view.layout.stride) for view in attention.args[:3]] == [(384, 8, 48, 1)] * 3


# ---------------------------------------------------------------- cat


def _mm_of_cat(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    joined = torch.cat([a.t(), b], 1)
    return torch.mm(joined, w), joined.sum(0)


@_cpu_decision
def test_cat_of_buffers_feeding_a_matmul_is_one_aten_cat() -> None:
    program = check_interpret(_mm_of_cat, lambda: [rand(12, 10), rand(10, 7), rand(19, 6)])
    (cat,) = _externs(program, aten.cat.default)
    parts, dim = cat.args
    assert dim == 1 and all(isinstance(p, (inductor_ir.ReinterpretView, inductor_ir.InputBuffer)) for p in parts)
    assert _ints(parts[0].layout.stride) == (1, 10)  # the transposed input, read in place
    assert all(b.read_names() != (cat.name,) or b.is_reduction for b in _computed(program))


@_cpu_decision
def test_cat_as_a_graph_output_with_promotion() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cat([a, b], 0)

    program = check_interpret(fn, lambda: [rand(3, 5), rand(4, 5, dtype=torch.float64)])
    assert _externs(program, aten.cat.default)


def test_cat_of_computed_values_or_read_by_pointwise_stays_fused() -> None:
    def computed(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.mm(torch.cat([a * 2, b], 1), w)

    def pointwise(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cat([a, b], 1).sin()

    program = check_interpret(computed, lambda: [rand(6, 4), rand(6, 3), rand(7, 2)])
    assert not _externs(program, aten.cat.default)
    program = check_interpret(pointwise, lambda: [rand(6, 4), rand(6, 3)])
    assert not _externs(program, aten.cat.default)


def test_cat_on_cuda_stays_a_masked_load() -> None:
    a, b = torch.empty(6, 4, device="meta"), torch.empty(6, 3, device="meta")
    gm = make_fx(lambda x, y: torch.cat([x, y], 1))(a, b)
    for node in gm.graph.nodes:  # pretend the graph was traced on a GPU: only the layouts matter
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            node.meta["val"] = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device="meta")
    program = inductor_ir.lower(gm, [a, b])
    assert _externs(program, aten.cat.default) == []


# ---------------------------------------------------------------- embedding gradient


def test_embedding_gradient_is_one_extern_call() -> None:
    assert aten.embedding_dense_backward.default not in inductor_ir.decompositions()

    def fn(grad: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return aten.embedding_dense_backward(grad, ids, 50, -1, False)

    def inputs() -> list[torch.Tensor]:
        ids = torch.randint(0, 50, (4, 9))
        ids[0, :3] = 7  # repeated rows accumulate
        return [rand(4, 9, 16), ids]

    program = check_interpret(fn, inputs)
    assert _externs(program, aten.embedding_dense_backward.default)
    assert not [b for b in _computed(program) if b.is_reduction]


def test_embedding_training_gradients_match_eager() -> None:
    aotgrad = pytest.importorskip("aotgrad")
    torch.manual_seed(0)
    table = torch.nn.Embedding(40, 8)
    position = torch.nn.Embedding(12, 8)

    def fn(ids: torch.Tensor, table_weight: torch.Tensor, position_weight: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.embedding(ids, table_weight) + torch.nn.functional.embedding(torch.arange(12), position_weight)
        return (x.tanh() * torch.linspace(-1.0, 2.0, 8)).sum()

    compiled_graphs: list[inductor_ir.Program] = []

    def compiler(gm: torch.fx.GraphModule, example: list[torch.Tensor]) -> object:
        program = inductor_ir.lower(gm, example)
        compiled_graphs.append(program)
        return lambda *args: inductor_ir.interpret(program, list(args))

    compiled = aotgrad.aot_function(
        fn, fw_compiler=compiler, bw_compiler=compiler, decompositions=inductor_ir.decompositions(),
        config=aotgrad.AotConfig(fallback_to_eager=False),
    )
    ids = torch.randint(0, 40, (3, 12))
    ids[1, :4] = 5
    weights = [table.weight.detach().clone().requires_grad_(), position.weight.detach().clone().requires_grad_()]
    expected_weights = [w.detach().clone().requires_grad_() for w in weights]
    compiled(ids, *weights).backward()
    fn(ids, *expected_weights).backward()
    for got, expected in zip(weights, expected_weights):
        assert_close(got.grad, expected.grad)
    backward = compiled_graphs[-1]
    assert len(_externs(backward, aten.embedding_dense_backward.default)) == 2


# ---------------------------------------------------------------- values realized for an earlier user


def test_a_value_stored_for_a_matmul_is_loaded_by_later_users() -> None:
    # MLP backward: the GELU gradient feeds a matmul (so it is stored), then the bias gradient sums
    # it. The sum must read the stored buffer, not recompute erf/exp from the activations.
    def fn(a: torch.Tensor, g: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        grad = g * (torch.erf(a * 0.7) + 1.0) * torch.exp(a * a * -0.5)
        return torch.mm(grad, w), grad.sum(0), grad.t()[1:3].exp()

    program = check_interpret(fn, lambda: [rand(8, 16), rand(8, 16), rand(16, 4)])
    (mm,) = _externs(program, aten.mm.default)
    stored = mm.args[0]
    assert isinstance(stored, inductor_ir.ComputedBuffer)
    others = [b for b in _computed(program) if b is not stored]
    assert len(others) == 2 and all(b.read_names() == (stored.name,) for b in others), [b.read_names() for b in others]


def test_a_gather_used_twice_is_stored_once() -> None:
    # GPT-2: the token + position embedding starts the residual stream that every layer norm reads.
    def fn(ids: torch.Tensor, table: torch.Tensor, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.nn.functional.embedding(ids, table) + position
        return x.var(-1), (x * 2.0).sin()

    program = check_interpret(fn, lambda: [torch.randint(0, 30, (3, 5)), rand(30, 8), rand(5, 8)])
    readers = [b for b in _computed(program) if "table_1" in b.read_names()]
    assert len(readers) == 1  # the lookup runs once; the variance and the sine read its buffer


@pytest.mark.parametrize("terms", [3, 6])
def test_a_sum_of_many_buffers_used_twice_is_stored(terms: int) -> None:
    # A residual stream x + a + b + ... read by several layers: past four buffers it is stored.
    def fn(*xs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        total = xs[0]
        for x in xs[1:]:
            total = total + x
        return total.amax(-1), total.exp()

    program = check_interpret(fn, lambda: [rand(4, 6) for _ in range(terms)])
    wide = [b for b in _computed(program) if len(b.read_names()) == terms]
    assert len(wide) == (1 if terms > 4 else 2)
