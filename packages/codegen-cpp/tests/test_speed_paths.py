"""Speed paths: each computes eager's result, and the generated code takes the fast form.

* ``kiln::exp`` selects 0 for lanes that underflow (no subnormal arithmetic) and keeps the exact
  two-step path for vectors with a subnormal result;
* index simplification with symbolic divisors (dynamic shapes) and split dims merged back;
* symbolic reduction ranges reuse ``exp`` values through variable-length scratch arrays while the
  range is short, and recompute them past that (both variants run here);
* a BatchNorm-style split reduction over (N, H, W) loads vectors, not gathers;
* values that are the same in every step of a row's loops (an RMSNorm backward's per-row factor)
  are computed once before the loops, and a scalar is splat by one broadcast.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import sympy
import torch
from cpp_test_groups import flat, pointwise_group
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend
from codegen_cpp.codegen.indexing import simplify_index
from codegen_cpp.codegen.reuse import MAX_SCRATCH_ELEMENTS
from inductor_ir import FloorDiv, ModularIndexing, ops

X0, X1 = (sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(2))
S0, S1 = (sympy.Symbol(f"s{i}", integer=True, positive=True) for i in range(2))


def _evaluate(expr: sympy.Expr, env: dict[sympy.Symbol, int]) -> int:
    """`expr` at integer values of its symbols (FloorDiv and ModularIndexing evaluate exactly)."""
    return int(expr.subs(env))


def test_exp_underflow_lanes_are_exact() -> None:
    n = 4099
    backend = CppBackend()

    def body(x: sympy.Symbol) -> None:
        ops.store("dst", x, ops.exp(ops.load("src", x)))

    group = pointwise_group("exp_underflow", body, [flat("src", torch.float32, n)], [flat("dst", torch.float32, n)], n)
    (kernel,) = backend.compile([backend.generate(group)])
    src = torch.empty(n).uniform_(-20.0, 5.0)
    src[: n // 3 : 2] = -3.4e38  # masked-softmax lanes next to normal ones: the fast path
    src[n // 3 : 2 * n // 3] = torch.empty(2 * n // 3 - n // 3).uniform_(-103.9, -87.4)  # subnormal results
    src[2 * n // 3 :: 5] = torch.empty(len(range(2 * n // 3, n, 5))).uniform_(-120.0, -87.0)
    src[-2:] = torch.tensor([float("nan"), float("-inf")])
    dst = torch.empty(n)
    kernel(src, dst)
    torch.testing.assert_close(dst, torch.exp(src), rtol=2e-6, atol=3e-45, equal_nan=True)
    assert bool((dst[: n // 3 : 2] == 0).all())


def test_symbolic_divisors_simplify_to_the_same_values() -> None:
    ranges = {X0: S0 * S1, X1: sympy.Integer(64)}
    cases = [
        64 * S1 * FloorDiv(64 * X0 + X1, 64 * S1) + 16 * ModularIndexing(X0 + FloorDiv(X1, 64), 1, S1),
        FloorDiv(S1 * X0 + X1, S1),
        ModularIndexing(S1 * X0 + X1, 1, S1),
        FloorDiv(3 * X0 + X1, 2 * S1),
    ]
    simple = [simplify_index(expr, ranges) for expr in cases]
    assert simple[0] == 64 * S1 * FloorDiv(X0, S1) + 16 * ModularIndexing(X0, 1, S1)
    rng = random.Random(0)
    for _ in range(300):
        s0, s1 = rng.randrange(1, 9), rng.randrange(64, 200)  # x1 < 64 <= s1 for the second and third
        env = {S0: s0, S1: s1, X0: rng.randrange(s0 * s1), X1: rng.randrange(64)}
        for expr, result in zip(cases, simple):
            assert _evaluate(result, env) == _evaluate(expr, env), (expr, result, env)


def test_split_dims_merge_back() -> None:
    r0 = sympy.Symbol("r0", integer=True, nonnegative=True)
    index = 50176 * FloorDiv(r0, 784) + ModularIndexing(r0, 1, 28) + 28 * ModularIndexing(r0, 28, 28)
    simple = simplify_index(index, {r0: sympy.Integer(1568)})
    assert simple == 50176 * FloorDiv(r0, 784) + ModularIndexing(r0, 1, 784)
    assert all(_evaluate(simple, {r0: v}) == _evaluate(index, {r0: v}) for v in range(1568))


def test_symbolic_softmax_reuses_exp_while_short_and_recomputes_past_that(backend: CppBackend) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x * 0.5, -1)

    with torch.no_grad():
        gm = make_fx(fn, tracing_mode="symbolic", decomposition_table=inductor_ir.decompositions())(torch.randn(3, 40))
    fakes = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
    compiled = inductor_ir.compile_graph(gm, fakes, backends={"cpu": backend})
    source = "\n".join(s.source for s in compiled.sources)
    assert f"<= {MAX_SCRATCH_ELEMENTS}) {{" in source and "scratch0[" in source
    for width in (5, 40, 1000, MAX_SCRATCH_ELEMENTS + 37):
        x = torch.randn(3, width) * 4
        result = compiled(x)
        actual = result[0] if isinstance(result, (tuple, list)) else result
        torch.testing.assert_close(actual, fn(x), rtol=1e-5, atol=1e-7)


def test_batch_norm_statistics_over_split_spatial_dims_load_vectors(backend: CppBackend) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.var_mean(x, dim=(0, 2, 3), correction=0)

    x = torch.randn(32, 8, 28, 28) * 2 + 1
    compiled = inductor_ir.compile_graph(make_fx(fn)(x), [x], backends={"cpu": backend})
    source = "\n".join(s.source for s in compiled.sources)
    assert "kiln::gather" not in source
    x = torch.randn(32, 8, 28, 28) * 2 + 1
    torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-6)


def test_row_invariant_values_are_computed_before_the_loops(backend: CppBackend) -> None:
    # RMSNorm's input gradient: rsqrt(mean_square + eps) of each row is loaded from the saved mean
    # square and used in every vector step of the row's second loop.
    def fn(dy: torch.Tensor, x: torch.Tensor, mean_square: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(mean_square + 1e-6)
        dxhat = dy * weight
        dot = (dxhat * x).sum(-1, keepdim=True)
        return dxhat * scale - x * dot * scale**3 / x.shape[-1]

    def inputs() -> list[torch.Tensor]:
        return [torch.randn(64, 100), torch.randn(64, 100), torch.rand(64, 1) + 0.5, torch.randn(100)]

    example = inputs()
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": backend})
    (source,) = [s.source for s in compiled.sources]
    second_loop = source.split("// reduction loop 1")[1]
    before, inside = second_loop.split("for (int64_t r0", 1)
    assert "kiln::rsqrt(" in before and "kiln::rsqrt(" not in inside, second_loop
    fresh = inputs()
    result = compiled(*fresh)
    actual = result[0] if isinstance(result, (tuple, list)) else result
    torch.testing.assert_close(actual, fn(*fresh), rtol=1e-5, atol=1e-6)


def _lines_inside_reduction_loops(source: str) -> list[str]:
    """The lines of ``source`` inside a ``for (int64_t r...`` loop (by brace depth)."""
    inside, depth, opened = [], 0, []
    for line in source.splitlines():
        if line.strip().startswith("for (int64_t r"):
            opened.append(depth)
        if opened:
            inside.append(line)
        depth += line.count("{") - line.count("}")
        while opened and depth <= opened[-1]:
            opened.pop()
    return inside


def _batch_norm_relu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    var, mean = torch.var_mean(x, (0, 2, 3), keepdim=True, correction=0)
    y = torch.relu((x - mean) * torch.rsqrt(var + 1e-5) * weight.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1))
    return y, var


def _normalize_relu_and_running_mean(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # The statistics come from elsewhere (as from a split reduction's kernels); the running mean's
    # column sum shares the normalizing loop, which is then tiled over two vectors of channels.
    mean, var = bias * 0.5, weight * 2
    y = torch.relu((x - mean.view(1, -1, 1, 1)) * torch.rsqrt(var.view(1, -1, 1, 1) + 1e-5) * weight.view(1, -1, 1, 1))
    return y, bias * 0.9 + 0.1 * x.mean((0, 2, 3))


@pytest.mark.parametrize(
    ("fn", "shape", "tiled"),
    [(_batch_norm_relu, (8, 64, 16, 16), False), (_normalize_relu_and_running_mean, (8, 32, 32, 32), True)],
    ids=["batch-norm", "tiled"],
)
def test_channel_invariant_values_of_a_channels_last_batch_norm_are_computed_before_the_loops(
    backend: CppBackend, fn: Callable[..., tuple[torch.Tensor, ...]], shape: tuple[int, ...], tiled: bool
) -> None:
    # Training-mode BatchNorm + ReLU over a channels-last map: the loops are vectorized across
    # channels, and rsqrt(var + eps) * weight (read from the variance this kernel stored after its
    # first loop, or from an input) is the same for every step of the normalizing loop. Tiled, each
    # vector of channels of the tile keeps its values in an array entry.
    def inputs() -> list[torch.Tensor]:
        x = torch.randn(*shape).contiguous(memory_format=torch.channels_last)
        return [x, torch.rand(shape[1]) + 0.5, torch.randn(shape[1])]

    example = inputs()
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": backend})
    source = "\n".join(s.source for s in compiled.sources)
    assert "kiln::rsqrt(" in source and ("vectors of outputs at once" in source) == tiled, source
    assert not any("kiln::rsqrt(" in line for line in _lines_inside_reduction_loops(source)), source
    for _ in range(2):
        fresh = inputs()
        for got, want in zip(compiled(*fresh), fn(*fresh)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_a_tiled_loop_computes_lane_index_values_in_the_loop(backend: CppBackend) -> None:
    # fuzz 19a784d1f6: index_fill over a (1, 8, 4) int32 tensor is tiled across outputs, and a
    # loop-invariant lane index (a lambda) was hoisted into an array typed with decltype, which
    # C++17 does not compile.
    def fn(a: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return a.index_fill(1, index % a.size(1), 3)

    def inputs() -> list[torch.Tensor]:
        return [torch.randint(-10, 10, (1, 8, 4), dtype=torch.int32), torch.randint(-10, 10, (2,))]

    example = inputs()
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*example)  # any() over the index
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": backend})
    assert "vectors of outputs at once" in "\n".join(s.source for s in compiled.sources)
    for _ in range(2):
        fresh = inputs()
        result = compiled(*fresh)
        torch.testing.assert_close(result[0] if isinstance(result, (tuple, list)) else result, fn(*fresh))


def test_splat_keeps_the_sign_of_zero_and_nan(backend: CppBackend) -> None:
    def fn(x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        return x / d[:, :1]  # each row's divisor, a scalar splat across the row's vectors

    x = torch.randn(4, 40)
    d = torch.tensor([[-0.0], [0.0], [float("nan")], [-2.5]]).expand(4, 3).contiguous()
    compiled = inductor_ir.compile_graph(make_fx(fn)(x, d), [x, d], backends={"cpu": backend})
    result = compiled(x, d)
    actual = result[0] if isinstance(result, (tuple, list)) else result
    torch.testing.assert_close(actual, fn(x, d), rtol=0, atol=0, equal_nan=True)
    assert torch.equal(actual[:2].signbit(), fn(x, d)[:2].signbit())


def test_horizontal_reductions_of_short_rows(backend: CppBackend) -> None:
    def fn(x: torch.Tensor, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.amax(1), x.amin(1), x.sum(1), (x * 0.1 + 1).prod(1), i.sum(1), i.amax(1), torch.softmax(x, 1)

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn(40, 64)
        for row, lane in enumerate(range(0, 64, 3)):
            x[row, lane] = float("nan")  # NaN in every lane position of some row, in the vector part
        return x, torch.randint(-1000, 1000, (40, 64))

    compiled = inductor_ir.compile_graph(make_fx(fn)(*inputs()), list(inputs()), backends={"cpu": backend})
    x, i = inputs()
    for actual, expected in zip(compiled(x, i), fn(x, i)):
        # atol: a sum of 64 standard normals near 0 differs by a few ulps of the terms in another order
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_exp_sigmoid_tanh_dense_relative_accuracy(backend: CppBackend) -> None:
    """The vector floor of exp's reduction and the reciprocal (estimate + Newton step) of sigmoid and
    tanh: relative error against float64 within 2x eager's (and a few float32 ulps)."""
    n = (1 << 18) + 3

    def body(x: sympy.Symbol) -> None:
        value = ops.load("src", x)
        ops.store("exp", x, ops.exp(value))
        ops.store("sigmoid", x, ops.sigmoid(value))
        ops.store("tanh", x, ops.tanh(value))

    outs = [flat(name, torch.float32, n) for name in ("exp", "sigmoid", "tanh")]
    group = pointwise_group("dense_exp_sigmoid_tanh", body, [flat("src", torch.float32, n)], outs, n)
    (kernel,) = backend.compile([backend.generate(group)])
    src = torch.linspace(-87.0, 88.0, n)
    results = [torch.empty(n) for _ in outs]
    kernel(src, *results)
    for result, reference in zip(results, (torch.exp, torch.sigmoid, torch.tanh)):
        exact = reference(src.double())
        tiny = exact.abs() < 1e-30  # sigmoid's far tail underflows toward subnormals
        ours = ((result.double() - exact).abs() / exact.abs())[~tiny].max()
        eager = ((reference(src).double() - exact).abs() / exact.abs())[~tiny].max()
        assert float(ours) <= max(2 * float(eager), 3.6e-7), (reference.__name__, float(ours), float(eager))
