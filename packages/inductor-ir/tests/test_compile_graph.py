"""compile_graph end to end with the reference backend, vs eager; wrapper, timings and dumps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


def _mlp(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor) -> Any:
    h = F.gelu(torch.addmm(b1, x, w1))
    h = F.layer_norm(h, (h.shape[-1],))
    return torch.log_softmax(h @ w2, -1), h.mean()


def _inputs() -> list[torch.Tensor]:
    return [rand(6, 8), rand(8, 16), rand(16), rand(16, 5)]


@pytest.mark.parametrize("decompose", [False, True])
def test_mlp_matches_eager(decompose: bool) -> None:
    example = _inputs()
    table = inductor_ir.decompositions() if decompose else None
    gm = make_fx(_mlp, decomposition_table=table)(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": ReferenceBackend()})
    fresh = _inputs()
    assert_close(compiled(*fresh), _mlp(*fresh))
    assert_close(inductor_ir.interpret(compiled.program, fresh), list(_mlp(*fresh)))


def test_talk_example_wrapper_and_dynamic_sizes() -> None:
    def toy(x: torch.Tensor) -> Any:
        y = x.sin()
        return y, y.cos()

    gm = make_fx(toy, tracing_mode="symbolic")(rand(8, 16))
    compiled = inductor_ir.compile_graph(gm, [rand(8, 16)], backends={"cpu": ReferenceBackend()})
    text = compiled.wrapper
    assert "def call(args):" in text and "args.clear()" in text and ".size(0)" in text
    assert text.count("empty_strided(") == 2
    for shape in [(3, 5), (8, 16), (1, 7)]:
        x = rand(*shape)
        assert_close(compiled(x), toy(x))


def test_non_contiguous_inputs_and_views_of_outputs() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        z = x * y
        return z.t(), z[1:], (z + 1).sum(0)

    make = lambda: [rand(5, 6, layout="transposed"), rand(5, 6, layout="sliced")]  # noqa: E731
    example = make()
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": ReferenceBackend()})
    fresh = make()
    assert_close(compiled(*fresh), fn(*fresh))


def test_timings_and_dump(tmp_path: Path) -> None:
    x = rand(4, 4)
    gm = make_fx(lambda a: a.exp().sum())(x)
    config = inductor_ir.InductorIRConfig(debug_dir=str(tmp_path), check_ir=True)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()}, config=config)
    t = compiled.timings
    assert min(t.lowering, t.scheduling, t.codegen, t.compile) >= 0 and t.lowering > 0
    names = {p.name for p in tmp_path.iterdir()}
    assert {"ir.txt", "groups.txt", "wrapper.py"} <= names and any(n.startswith("kernel_") for n in names)


def test_calls_with_inputs_it_was_not_compiled_for_are_clear_errors() -> None:
    x = rand(4, 4)
    compiled = inductor_ir.compile_graph(make_fx(lambda a: a.exp())(x), [x], backends={"cpu": ReferenceBackend()})
    with pytest.raises(ValueError, match=r"compiled as float32 \[4, 4\], got torch.float32 \[5, 4\]"):
        compiled(rand(5, 4))
    with pytest.raises(TypeError, match="takes 1 inputs, got 2"):
        compiled(x, x)


def test_missing_backend_is_a_clear_error() -> None:
    x = rand(4, 4)
    gm = make_fx(lambda a: a.exp())(x)
    with pytest.raises(inductor_ir.MissingBackendError, match="no backend handles 'cpu'"):
        inductor_ir.compile_graph(gm, [x], backends={})


def test_fallbacks_and_multi_outputs_run_in_the_wrapper() -> None:
    def fn(x: torch.Tensor) -> Any:
        values, indices = torch.sort(x.sin(), 1)
        return torch.cumsum(values, 1) + indices, torch.topk(x, 2)[1]

    example = [rand(4, 6)]
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": ReferenceBackend()})
    fresh = [rand(4, 6)]
    assert_close(compiled(*fresh), fn(*fresh))


def test_dynamic_shapes_through_reductions_views_and_indexing() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor, i: torch.Tensor) -> Any:
        s = torch.softmax(x, -1) * 2
        flat = x.t().reshape(-1)
        return s, x.sum(0) + y, flat[:3] + 1, torch.cat([x, x * 2], 0).amax(0), y[i]

    def make(n: int, m: int) -> list[torch.Tensor]:
        return [rand(n, m), rand(m), torch.randint(0, m, (4,))]

    gm = make_fx(fn, tracing_mode="symbolic")(*make(5, 7))
    compiled = inductor_ir.compile_graph(gm, make(5, 7), backends={"cpu": ReferenceBackend()})
    assert compiled.program.size_sources, "sizes should stay symbolic"
    for n, m in [(5, 7), (3, 9), (6, 4)]:
        inputs = make(n, m)
        assert_close(compiled(*inputs), fn(*inputs))
        assert_close(inductor_ir.interpret(compiled.program, inputs), list(fn(*inputs)))


def test_convolution_runs_as_an_extern_kernel_between_fused_groups() -> None:
    def net(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.relu(F.conv2d(x.sigmoid(), w, b, padding=1)).mean((2, 3))

    make = lambda: [rand(2, 3, 8, 8), rand(4, 3, 3, 3), rand(4)]  # noqa: E731
    example = make()
    compiled = inductor_ir.compile_graph(make_fx(net)(*example), example, backends={"cpu": ReferenceBackend()})
    assert any(type(b) is inductor_ir.ExternKernel for b in compiled.program.buffers)
    fresh = make()
    assert_close(compiled(*fresh), net(*fresh))


@pytest.mark.gpu
def test_cuda_graph_with_a_cpu_scalar_tensor() -> None:
    def fn(x: torch.Tensor, scale: torch.Tensor) -> Any:
        return torch.softmax(x * scale, -1), (x.sin() + 1).sum(0)

    make = lambda: [rand(6, 10).cuda(), torch.tensor(1.5)]  # noqa: E731
    example = make()
    backends = {"cuda": ReferenceBackend("cuda"), "cpu": ReferenceBackend("cpu")}
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends=backends)
    assert all(group.device_type == "cuda" for group in compiled.schedule.kernel_groups)
    fresh = make()
    assert_close(compiled(*fresh), fn(*fresh))


def test_graphs_without_fx_metadata_still_compile() -> None:
    def fn(x: torch.Tensor) -> Any:
        return torch.cumsum(x.exp(), 1) + 1, torch.sort(x, 0)[1]

    gm = torch.fx.symbolic_trace(lambda x: (torch.ops.aten.cumsum.default(torch.ops.aten.exp.default(x), 1) + 1,
                                            torch.ops.aten.sort.default(x, 0)[1]))  # fmt: skip
    x = rand(4, 5)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    x = rand(4, 5)
    assert_close(compiled(x), fn(x))
