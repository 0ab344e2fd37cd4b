"""Welford reductions (var, var_mean, norm statistics) as Triton kernels, compared with eager.

CPU tier: Triton's interpreter (`cpu_backend`); the `gpu` tests run the same graphs as real kernels.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def _check(backend: TritonBackend, fn: Any, make_inputs: Any, device: str = "cpu", **tol: float) -> Any:
    example = [t.to(device) for t in make_inputs()]
    gm = make_fx(fn)(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={device.split(":")[0]: backend})
    fresh = [t.to(device) for t in make_inputs()]
    actual, expected = compiled(*fresh), fn(*fresh)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, msg=lambda m, i=i: f"output {i}: {m}", **tol)
    return compiled


def _fn(x: torch.Tensor, col: torch.Tensor, long: torch.Tensor, one: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        *torch.var_mean(x, dim=-1, correction=0),  # persistent, ragged RBLOCK
        *torch.var_mean(x, dim=[0, 2], keepdim=True),
        *torch.var_mean(col, dim=0),  # outer reduction
        *torch.var_mean(long, dim=1),  # looped: running Welford per lane
        torch.var(one, dim=1, correction=0),  # reductions of size 1
    )


def _inputs() -> tuple[torch.Tensor, ...]:
    return torch.randn(5, 3, 37), torch.randn(29, 40), torch.randn(3, 3000) * 0.1 + 1e4, torch.randn(4, 1)


def _kernels(compiled: Any) -> str:
    return "\n".join(t for n, t in compiled.artifacts().items() if n.startswith("kernel"))


def test_var_mean_persistent_and_looped(cpu_backend: TritonBackend) -> None:
    compiled = _check(cpu_backend, _fn, _inputs, rtol=1e-3, atol=1e-5)
    source = _kernels(compiled)
    assert "triton_per_" in source and "triton_red_" in source and "_acc_mean" in source
    assert not any(n.reduction_type == "sum" for g in compiled.schedule.kernel_groups for n in g.nodes)


def test_large_mean_small_variance(cpu_backend: TritonBackend) -> None:
    """Values near 1e4 (spread 0.1): E[x^2] - E[x]^2 in float32 is off by ~100%; Welford is not."""

    def inputs() -> tuple[torch.Tensor, ...]:
        return torch.randn(2, 700) * 0.1 + 1e4, torch.randn(2, 3000) * 0.1 + 1e4

    def fn(small: torch.Tensor, large: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.var(small, dim=1), torch.var(large, dim=1)

    x = inputs()[1]
    naive = ((x * x).mean(1) - x.mean(1) ** 2) * 3000 / 2999
    assert not torch.allclose(naive, x.var(1), rtol=0.1)  # the tolerance below tells good from naive
    _check(cpu_backend, fn, inputs, rtol=2e-3, atol=0)


def test_siblings_share_one_reduction_and_layer_norm(cpu_backend: TritonBackend) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b), *torch.var_mean(x, dim=1))

    example = (torch.randn(6, 50), torch.randn(50), torch.randn(50))
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*example)
    compiled = inductor_ir.compile_graph(gm, list(example), backends={"cpu": cpu_backend})
    fresh = (torch.randn(6, 50), torch.randn(50), torch.randn(50))
    for a, e in zip(compiled(*fresh), fn(*fresh)):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    (group,) = compiled.schedule.kernel_groups
    assert sum(n.reduction_type == "welford_reduce" for n in group.nodes) >= 2
    assert _kernels(compiled).count("tl.sum(tmp") <= 4  # one Welford (3 sums), not one per sibling node


def test_norm_layers_forward_and_backward_through_aotgrad(cpu_backend: TritonBackend) -> None:
    aotgrad = pytest.importorskip("aotgrad")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(6), torch.nn.LayerNorm(9))
    reference = torch.nn.Sequential(torch.nn.BatchNorm1d(6), torch.nn.LayerNorm(9))
    reference.load_state_dict(model.state_dict())
    compiled = aotgrad.aot_graph(
        model,
        [torch.randn(4, 6, 9, requires_grad=True)],
        fw_compiler=lambda gm, ex: inductor_ir.compile_graph(gm, ex, backends={"cpu": cpu_backend}),
        decompositions=inductor_ir.decompositions(),
        config=aotgrad.AotConfig(fallback_to_eager=False),
    )
    x = torch.randn(4, 6, 9, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    out, expected = compiled(x), reference(x_ref)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, [x, *model.parameters()], grad)
    want = torch.autograd.grad(expected, [x_ref, *reference.parameters()], grad)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_split_welford_persistent_and_looped(kiln_cache: Any) -> None:
    """Batch-norm statistics in two stages; a low persistent limit makes both stages looped too."""
    from codegen_triton import TritonConfig
    from codegen_triton.config import interpreter_ready

    if not interpreter_ready():
        pytest.skip("needs Triton's interpreter")

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.var_mean(x, dim=(0, 2, 3))

    def inputs() -> tuple[torch.Tensor, ...]:
        return (torch.randn(16, 4, 32, 32) * 0.1 + 1e3,)

    for limit in (1024, 8):
        backend = TritonBackend(device_type="cpu", config=TritonConfig(cache_dir=kiln_cache, persistent_reduction_limit=limit))
        compiled = _check(backend, fn, inputs, rtol=2e-3, atol=0)
        kinds = [n.reduction_type for g in compiled.schedule.kernel_groups for n in g.nodes]
        assert "welford_combine" in kinds
        assert ("triton_red_" in _kernels(compiled)) == (limit == 8)


@pytest.mark.gpu
def test_var_mean_split_welford_and_scatter_on_gpu(gpu_backend: TritonBackend) -> None:
    _check(gpu_backend, _fn, _inputs, device="cuda", rtol=1e-3, atol=1e-5)
    bn = lambda: (torch.randn(64, 16, 32, 32) * 0.1 + 1e3,)  # noqa: E731
    compiled = _check(gpu_backend, lambda x: torch.var_mean(x, dim=(0, 2, 3)), bn, device="cuda", rtol=2e-3, atol=0)
    assert "welford_combine" in {n.reduction_type for g in compiled.schedule.kernel_groups for n in g.nodes}
    scatter = lambda: (torch.randn(50, 64), torch.randint(0, 50, (300, 64)), torch.randn(300, 64))  # noqa: E731
    _check(gpu_backend, lambda x, i, s: (torch.scatter_add(x, 0, i, s),), scatter, device="cuda", rtol=1e-4, atol=1e-4)


def test_scatter_and_index_put_lowerings(cpu_backend: TritonBackend) -> None:
    """scatter / index_put / index_add become dense reductions (see inductor_ir/lowering/scatter.py)."""

    def fn(x: Any, i: Any, s: Any, r: Any, v: Any, y: Any) -> tuple[torch.Tensor, ...]:
        return (
            torch.scatter_add(x, 0, i, s),
            x.scatter(1, i.remainder(6), 1.5),
            torch.ops.aten.index_put(y, [r], v, True),  # duplicates add up
        )

    def inputs() -> tuple[torch.Tensor, ...]:
        rows = torch.randint(-5, 5, (7,))
        return torch.randn(5, 6), torch.randint(0, 5, (3, 4)), torch.randn(4, 5), rows, torch.randn(7, 37), torch.randn(5, 37)

    compiled = _check(cpu_backend, fn, inputs, rtol=1e-5, atol=1e-5)
    assert not [b for b in compiled.program.buffers if type(b) is inductor_ir.FallbackKernel]


def test_layer_norm_over_cat_with_masked_loads(cpu_backend: TritonBackend) -> None:
    # The mean and m2 siblings read masked loads (cat of a permuted input): ViT's first layer norm.
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.nn.functional.layer_norm(torch.cat([a, b.permute(0, 2, 1)], 1), (64,)),)

    _check(cpu_backend, fn, lambda: (torch.randn(2, 1, 64), torch.randn(2, 64, 16)), rtol=1e-4, atol=1e-5)


def _means_with_infinities(short: torch.Tensor, long: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (*torch.var_mean(short, dim=1), *torch.var_mean(long, dim=1))


def _inputs_with_infinities() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(61)
    short, long = torch.randn(4, 6, generator=generator), torch.randn(4, 3000, generator=generator)
    # Rows with two infinities or none: with one, eager's Welford mean depends on its order of
    # work (inf last: inf; a finite value after it: NaN), and eager's CPU and CUDA kernels differ.
    for t in (short, long):
        t[0, :2] = float("-inf")
        t[2, 0], t[2, -1] = float("inf"), float("inf")
        t[3, 1], t[3, -2] = float("inf"), float("-inf")
    return [short, long]


def test_a_welford_mean_over_two_infinities_is_nan_as_eagers(cpu_backend: TritonBackend) -> None:
    # fuzz 4132951cc7: the mean came from a sum (-inf) where eager's Welford gives inf - inf = NaN
    _check(cpu_backend, _means_with_infinities, _inputs_with_infinities, equal_nan=True)


@pytest.mark.gpu
def test_a_welford_mean_over_two_infinities_is_nan_as_eagers_on_the_gpu(gpu_backend: TritonBackend) -> None:
    _check(gpu_backend, _means_with_infinities, _inputs_with_infinities, "cuda", equal_nan=True)


def _stats_of_equal_values(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    variance, mean = torch.var_mean(x, dim=-1, correction=0)
    return variance, mean, variance == 0, mean == x[:, 0]


def _rows_of_equal_values() -> list[torch.Tensor]:
    # 3 * x rounds for most float64 x: a mean taken as sum / 3 is off by an ulp, so m2 > 0
    values = torch.randn(6, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    values[0] = float("inf")
    return [values.expand(6, 3).contiguous()]


def test_a_row_of_equal_values_has_variance_exactly_0(cpu_backend: TritonBackend) -> None:
    # fuzz b15e6679cb: var(x.expand(3, 2), 0) cast to bool was True for one column, eager False
    _check(cpu_backend, _stats_of_equal_values, _rows_of_equal_values, equal_nan=True, rtol=0, atol=0)


@pytest.mark.gpu
def test_a_row_of_equal_values_has_variance_exactly_0_on_the_gpu(gpu_backend: TritonBackend) -> None:
    _check(gpu_backend, _stats_of_equal_values, _rows_of_equal_values, "cuda", equal_nan=True, rtol=0, atol=0)
