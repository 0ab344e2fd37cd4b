"""Loops in memory order: pointwise kernels over channels-last buffers store vectors, and CPU
convolution graphs run channels-last; every result still equals eager's."""

from __future__ import annotations

import pytest
import sympy
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend
from codegen_cpp.codegen.lanes import VECTOR_LANES
from codegen_cpp.codegen.space import plan_space
from inductor_ir import BufferRecord, KernelGroup, KernelNode, ops

X0, X1, X2 = (sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(3))


def _copy_group(sizes: tuple[int, int, int], load: sympy.Expr, store: sympy.Expr) -> KernelGroup:
    size = tuple(sympy.Integer(s) for s in sizes)
    out = BufferRecord("out", torch.float32, size, (sympy.Integer(1),) * 3)
    src = BufferRecord("src", torch.float32, size, (sympy.Integer(1),) * 3)

    def body(xs: list[sympy.Expr], rs: list[sympy.Expr]) -> None:
        subs = dict(zip((X0, X1, X2), xs))
        ops.store("out", store.xreplace(subs), ops.load("src", load.xreplace(subs)))

    return KernelGroup("g", "cpu", size, (), (KernelNode(out, body, "pointwise"),), (src,), (out,))


def test_loops_follow_the_store_order() -> None:
    # (N, C, HW) = (4, 16, 64) iterated in the group's order, stored channels-last.
    space = plan_space(_copy_group((4, 16, 64), 1024 * X0 + X1 * 64 + X2, 1024 * X0 + X1 + 16 * X2))
    # Loops N, HW, C: the store is contiguous in the innermost loop (the NCHW load keeps them apart).
    assert space.x_sizes == (4, 64, 16)
    n, hw, c = space.loop_xs
    assert space.body_xs == (n, c, hw)
    # With a channels-last load too, the three dims merge into one loop.
    merged = plan_space(_copy_group((4, 16, 64), 1024 * X0 + X1 + 16 * X2, 1024 * X0 + X1 + 16 * X2))
    assert merged.x_sizes == (4096,)
    (loop,) = merged.loop_xs
    assert merged.body_xs == (0, loop, 0)


def test_group_order_stays_when_the_store_is_not_affine() -> None:
    from inductor_ir import ModularIndexing

    store = 1024 * X0 + ModularIndexing(X1 + 16 * X2, 1, 1024)
    space = plan_space(_copy_group((4, 16, 64), 1024 * X0 + X1 * 64 + X2, store))
    assert len(space.loop_xs) >= 2 and space.body_xs[0] == space.loop_xs[0]


def _compile(fn, inputs: list[torch.Tensor], backend: CppBackend):  # type: ignore[no-untyped-def]
    gm = make_fx(fn)(*inputs)
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": backend})
    return compiled, "\n".join(source.source for source in compiled.sources)


def test_channels_last_pointwise_stores_vectors(backend: CppBackend) -> None:
    def scale_shift_relu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * w[None, :, None, None] + b[None, :, None, None])

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 24, 7, 9, generator=g).contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(24, generator=g), torch.randn(24, generator=g)
    compiled, source = _compile(scale_shift_relu, [x, w, b], backend)
    assert "kiln::scatter" not in source and "kiln::gather" not in source
    result = compiled(x, w, b)
    expected = scale_shift_relu(x, w, b)
    assert result.stride() == expected.stride()
    torch.testing.assert_close(result, expected, rtol=0, atol=0)


def _conv_bn_relu_pool(
    x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.relu(F.conv2d(x, w1, padding=1) * scale[:, None, None] + shift[:, None, None])
    z = F.conv2d(y, w2, stride=2, padding=1)
    return torch.relu(z).mean((2, 3)), z


def test_cpu_convolution_graph_runs_channels_last(backend: CppBackend) -> None:
    g = torch.Generator().manual_seed(1)
    inputs = [
        torch.randn(2, 3, 12, 12, generator=g),
        torch.randn(16, 3, 3, 3, generator=g),
        torch.randn(16, 16, 3, 3, generator=g),
        torch.randn(16, generator=g),
        torch.randn(16, generator=g),
    ]
    compiled, _ = _compile(_conv_bn_relu_pool, inputs, backend)
    convs = [b for b in compiled.program.buffers if isinstance(b, inductor_ir.ExternKernel)]
    assert len(convs) == 2
    for conv in convs:  # every feature map channels-last, the NCHW input image copied once
        size = tuple(int(s) for s in conv.layout.size)
        assert tuple(int(s) for s in conv.layout.stride) == (
            size[1] * size[2] * size[3],
            1,
            size[3] * size[1],
            size[1],
        )
    fresh = [torch.randn(t.shape, generator=g) for t in inputs]
    results = compiled(*fresh)
    expected = _conv_bn_relu_pool(*fresh)
    for got, want in zip(results, expected):
        assert got.stride() == want.stride()  # outputs keep the layouts FX recorded (z is NCHW)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _bias_gelu_backward(
    x: torch.Tensor, b: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.ops.aten.gelu_backward(g, x + b, approximate="tanh")
    return y, y.sum(0)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_column_sums_run_whole_row_tiles(backend: CppBackend, threads: int) -> None:
    # A pointwise result stored beside its column sum: tiles as long as the row (split per thread).
    g = torch.Generator().manual_seed(2)
    inputs = [
        torch.randn(300, 1000, generator=g),
        torch.randn(1000, generator=g),
        torch.randn(300, 1000, generator=g),
    ]
    compiled, source = _compile(_bias_gelu_backward, inputs, backend)
    tiles = 1000 // VECTOR_LANES  # whole vectors of a row: 125 with 8 lanes, 62 with 16 (AVX-512)
    assert f"{tiles} vectors of outputs at once" in source
    assert f"kiln_tile = std::min<int64_t>({tiles}," in source
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = compiled(*inputs)
    finally:
        torch.set_num_threads(previous)
    want = _bias_gelu_backward(*inputs)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[1], want[1], rtol=1e-5, atol=1e-4)
