"""Welford reductions: var / var_mean / norm statistics as one ``welford_reduce`` pass, vs eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, check_interpret
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.ir.nodes import ComputedBuffer


def _welford_nodes(program: inductor_ir.Program) -> list[ComputedBuffer]:
    return [
        b
        for b in program.buffers
        if isinstance(b, ComputedBuffer) and b.is_reduction and b.data.reduction_type == "welford_reduce"  # type: ignore[union-attr]
    ]


@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dims", [[1], [0, 2], [-1], None])
def test_var_mean_matches_eager(correction: int, keepdim: bool, dims: Any) -> None:
    def fn(x: torch.Tensor) -> Any:
        var, mean = torch.var_mean(x, dim=dims, correction=correction, keepdim=keepdim)
        return var, mean, torch.var(x.transpose(0, 2), dim=0, correction=correction)

    program = check_interpret(fn, lambda: [torch.randn(4, 5, 19)])
    assert {b.data.output_index for b in _welford_nodes(program)} == {0, 1}  # type: ignore[union-attr]
    assert all(b.data.reduction_type != "sum" for b in program.buffers if isinstance(b, ComputedBuffer) and b.is_reduction)  # type: ignore[union-attr]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_var_mean_dtypes(dtype: torch.dtype) -> None:
    check_interpret(lambda x: torch.var_mean(x, dim=-1), lambda: [torch.randn(6, 33).to(dtype)])


def test_size_one_and_scalar_reductions() -> None:
    check_interpret(lambda x: torch.var_mean(x, dim=1, correction=0), lambda: [torch.randn(5, 1)])
    check_interpret(lambda x: torch.var_mean(x, dim=[], correction=0), lambda: [torch.randn(3, 4)])
    check_interpret(lambda x: torch.var(x, correction=0), lambda: [torch.randn(())])


def test_large_mean_small_variance() -> None:
    """Values near 1e4 with spread 1e-2: E[x^2] - E[x]^2 in float32 is noise; one-pass Welford is not."""
    make = lambda: [torch.randn(8, 4096) * 1e-2 + 1e4]  # noqa: E731
    gm = make_fx(lambda x: torch.var_mean(x, dim=1))(*make())
    x = make()[0]
    expected = torch.var_mean(x, dim=1)
    naive = ((x * x).mean(1) - x.mean(1) ** 2) * 4096 / 4095
    assert not torch.allclose(naive, expected[0], rtol=1e-2)  # the test can tell a bad algorithm
    for backend in (None, ReferenceBackend()):
        if backend is None:
            actual = inductor_ir.interpret(inductor_ir.lower(gm, [x]), [x])
        else:
            actual = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})(x)
        torch.testing.assert_close(actual[0], expected[0], rtol=1e-3, atol=0)
        torch.testing.assert_close(actual[1], expected[1], rtol=1e-6, atol=0)


def test_welford_siblings_fuse_into_one_loop_with_their_epilogue() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)

    inputs = [torch.randn(6, 40), torch.randn(40), torch.randn(40)]
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*inputs)
    backend = ReferenceBackend()
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": backend})
    fresh = [torch.randn(6, 40), torch.randn(40), torch.randn(40)]
    assert_close(compiled(*fresh), fn(*fresh))
    (group,) = backend.generated  # statistics and normalization: one kernel
    welfords = [n for n in group.nodes if n.reduction_type == "welford_reduce"]
    assert len(welfords) == 2 and {n.loop for n in welfords} == {0}
    assert group.num_loops == 2 and not [n for n in group.nodes if n.reduction_type == "sum"]


def test_norm_layers_forward_and_backward_through_aotgrad() -> None:
    aotgrad = pytest.importorskip("aotgrad")
    torch.manual_seed(0)
    cases = [
        (torch.nn.LayerNorm(24), (5, 3, 24)),
        (torch.nn.BatchNorm2d(4), (3, 4, 5, 5)),
        (torch.nn.GroupNorm(2, 6), (3, 6, 4, 4)),
    ]
    for model, shape in cases:
        programs: list[inductor_ir.Program] = []

        def compiler(gm: torch.fx.GraphModule, example: list[Any]) -> Any:
            compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": ReferenceBackend()})
            programs.append(compiled.program)
            return compiled

        reference = type(model)(*_arguments(model))
        reference.load_state_dict(model.state_dict())
        x = torch.randn(shape, requires_grad=True)
        compiled = aotgrad.aot_graph(
            model,
            [x],
            fw_compiler=compiler,
            decompositions=inductor_ir.decompositions(),
            config=aotgrad.AotConfig(fallback_to_eager=False),
        )
        x_ref = x.detach().clone().requires_grad_(True)
        out, expected = compiled(x), reference(x_ref)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
        grad = torch.randn_like(out)
        got = torch.autograd.grad(out, [x, *model.parameters()], grad)
        want = torch.autograd.grad(expected, [x_ref, *reference.parameters()], grad)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
        assert _welford_nodes(programs[0]), type(model).__name__
        assert not programs[0].lowering_errors


def _arguments(model: torch.nn.Module) -> tuple[Any, ...]:
    if isinstance(model, torch.nn.LayerNorm):
        return (model.normalized_shape,)
    if isinstance(model, torch.nn.BatchNorm2d):
        return (model.num_features,)
    assert isinstance(model, torch.nn.GroupNorm)
    return (model.num_groups, model.num_channels)


def test_long_reduction_to_few_outputs_runs_in_two_stages() -> None:
    """Batch-norm statistics: (mean, m2) per chunk by welford_reduce, then welford_combine per channel."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> Any:
        return (*torch.var_mean(x, dim=(0, 2, 3), correction=0), torch.var(y))

    def inputs() -> list[torch.Tensor]:
        return [torch.randn(16, 8, 32, 32) * 0.1 + 1e3, torch.randn(3 * 16384) * 2 + 1]

    program = check_interpret(fn, inputs)
    kinds = [b.data.reduction_type for b in program.buffers if isinstance(b, ComputedBuffer) and b.is_reduction]  # type: ignore[union-attr]
    assert kinds.count("welford_combine") == 4 and kinds.count("welford_reduce") == 4  # var: mean, m2 in both
    example = inputs()
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": ReferenceBackend()})
    fresh = inputs()
    assert_close(compiled(*fresh), fn(*fresh))
