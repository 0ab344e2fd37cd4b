"""Welford reductions (var, var_mean, norm statistics) in C++ kernels, compared with eager.

Cases are batched into few graphs: each compile is one C++ library.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def _check(backend: CppBackend, fn: Any, make_inputs: Any, **tolerances: float) -> inductor_ir.CompiledGraph:
    example = make_inputs()
    gm = make_fx(fn)(*example)
    compiled = inductor_ir.compile_graph(gm, list(example), backends={"cpu": backend})
    fresh = make_inputs()
    actual, expected = compiled(*fresh), fn(*fresh)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, msg=lambda m, i=i: f"output {i}: {m}", **tolerances)
    return compiled


def test_var_mean_shapes_corrections_and_layouts(backend: CppBackend) -> None:
    def fn(x: torch.Tensor, col: torch.Tensor, one: torch.Tensor, big: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            *torch.var_mean(x, dim=-1, correction=0),  # 37: vector lanes + scalar tail
            *torch.var_mean(x, dim=[0, 2], correction=1, keepdim=True),
            torch.var(x, dim=1),  # 3 < one vector: scalar loop
            *torch.var_mean(col, dim=0),  # vectorized across outputs
            *torch.var_mean(one, dim=1, correction=0),  # reductions of size 1
            *torch.var_mean(big),  # one output: split across threads
        )

    compiled = _check(
        backend,
        fn,
        lambda: (torch.randn(5, 3, 37), torch.randn(29, 40), torch.randn(7, 1), torch.randn(70001) * 3 + 2),
        rtol=1e-4,
        atol=1e-5,
    )
    sources = "\n".join(text for name, text in compiled.artifacts().items() if name.startswith("kernel"))
    assert "_vmean" in sources and "split across threads" in sources
    assert not any(n.reduction_type == "sum" for g in compiled.schedule.kernel_groups for n in g.nodes)


def test_welford_siblings_share_one_accumulator(backend: CppBackend) -> None:
    # mean and m2 nodes: one moments call over a row (over each chunk of a long one, split in two
    # stages), one Welford triple over a row longer than a row array, not split (600 outputs)
    for rows, length, marker in ((6, 50, "kiln::row_moments("), (6, 20000, "kiln::row_moments("), (600, 16400, "_vmean = kiln::splat")):
        compiled = _check(
            backend, lambda x: torch.var_mean(x, dim=1), lambda m=rows, n=length: (torch.randn(m, n),), rtol=1e-5, atol=1e-6
        )
        source = "\n".join(t for n, t in compiled.artifacts().items() if n.startswith("kernel"))
        assert source.count(marker) == 1, length


def test_large_mean_small_variance_and_dtypes(backend: CppBackend) -> None:
    def fn(x: torch.Tensor, d: torch.Tensor, h: torch.Tensor, bn: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            *torch.var_mean(x, dim=1),
            *torch.var_mean(d, dim=0),
            *torch.var_mean(h, dim=-1),
            *torch.var_mean(bn, dim=(0, 2, 3)),  # split: welford_reduce per chunk, then welford_combine
        )

    def inputs() -> tuple[torch.Tensor, ...]:
        x = torch.randn(4, 5000) * 1e-2 + 1e4  # E[x^2] - E[x]^2 in float32 would be noise
        bn = torch.randn(16, 4, 32, 32) * 1e-2 + 1e3
        return x, torch.randn(33, 3, dtype=torch.float64), torch.randn(3, 70).to(torch.bfloat16), bn

    example = inputs()
    gm = make_fx(fn)(*example)
    compiled = inductor_ir.compile_graph(gm, list(example), backends={"cpu": backend})
    fresh = inputs()
    actual, expected = compiled(*fresh), fn(*fresh)
    torch.testing.assert_close(actual[0], expected[0], rtol=2e-3, atol=0)
    torch.testing.assert_close(actual[1], expected[1], rtol=1e-6, atol=0)
    torch.testing.assert_close(actual[2:4], expected[2:4], rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(actual[4:6], expected[4:6], rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(actual[6:], expected[6:], rtol=2e-3, atol=0)
    kinds = {n.reduction_type for g in compiled.schedule.kernel_groups for n in g.nodes}
    assert "welford_combine" in kinds


def test_norm_layers_forward_and_backward_through_aotgrad(backend: CppBackend) -> None:
    aotgrad = pytest.importorskip("aotgrad")
    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = torch.nn.BatchNorm2d(4)
            self.ln = torch.nn.LayerNorm(21)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.ln(self.bn(x).flatten(1)[:, 3:24] * 2)

    model, reference = Net(), Net()
    reference.load_state_dict(model.state_dict())
    groups: list[Any] = []

    def compiler(gm: torch.fx.GraphModule, example: list[Any]) -> Any:
        compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": backend})
        groups.extend(compiled.schedule.kernel_groups)
        return compiled

    x = torch.randn(3, 4, 5, 5, requires_grad=True)
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
    torch.testing.assert_close(model.bn.running_var, reference.bn.running_var)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, [x, *model.parameters()], grad)
    want = torch.autograd.grad(expected, [x_ref, *reference.parameters()], grad)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)
    assert any(n.reduction_type == "welford_reduce" for g in groups for n in g.nodes)


def test_scatter_and_index_put_lowerings(backend: CppBackend) -> None:
    """scatter / index_put / index_add become dense reductions (see inductor_ir/lowering/scatter.py)."""

    def fn(x: Any, i: Any, s: Any, r: Any, v: Any, y: Any, j: Any) -> tuple[torch.Tensor, ...]:
        return (
            torch.scatter_add(x, 0, i, s),
            x.scatter_reduce(0, i, s, "amax", include_self=False),
            torch.ops.aten.index_put(y, [r], v, True),  # duplicates add up
            y.index_add(0, j, v[:4], alpha=0.5),
        )

    def inputs() -> tuple[torch.Tensor, ...]:
        rows = torch.randint(-5, 5, (7,))
        return (torch.randn(5, 6), torch.randint(0, 5, (3, 4)), torch.randn(4, 5), rows, torch.randn(7, 37),
                torch.randn(5, 37), torch.randint(0, 5, (4,)))  # fmt: skip

    compiled = _check(backend, fn, inputs, rtol=1e-5, atol=1e-5)
    assert not [b for b in compiled.program.buffers if type(b) is inductor_ir.FallbackKernel]


def test_siblings_over_masked_loads_agree_in_vector_and_scalar_runs(backend: CppBackend) -> None:
    # Masked loads (from cat) are CSE'd in the vector run but not in the scalar tail: the siblings
    # must share one accumulator in both runs, or m2 misses the vector lanes (ViT's layer norm).
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.nn.functional.layer_norm(torch.cat([a, b.permute(0, 2, 1)], 1), (64,)),)

    _check(backend, fn, lambda: (torch.randn(2, 1, 64), torch.randn(2, 64, 16)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", (torch.float16, torch.float32, torch.float64), ids=str)
def test_mean_of_no_elements_is_nan(backend: CppBackend, dtype: torch.dtype) -> None:
    # Eager's mean of an empty reduction is 0 / 0; the Welford running mean starts (and stayed) at 0.
    def fn(flat: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, one: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            *torch.var_mean(flat, 0),  # scalar
            *torch.std_mean(rows, 0, correction=0),  # vectorized across outputs
            *torch.var_mean(cols, 1, keepdim=True),  # one reduction per output row
            *torch.var_mean(one, 1),  # one element: var 0 / 0, mean the element
        )

    generator = torch.Generator().manual_seed(41)
    shapes = ((0,), (0, 37), (37, 0), (37, 1))
    inputs = [torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype) for shape in shapes]
    _check(backend, fn, lambda: inputs, equal_nan=True)


@pytest.mark.parametrize("length", [1, 2, 3, 17, 40])
def test_rows_with_infinities_keep_the_mean_and_a_nan_variance(backend: CppBackend, length: int) -> None:
    # fuzz fde307ee12: a row's moments are shifted by its first value; an infinite first value made
    # every term inf - inf, so the mean of [inf] (var_mean over a dim of size 1) came out NaN where
    # eager gives inf. A row holding an infinity has the mean torch.mean gives and a NaN variance
    # (eager's var_mean agrees for one element; for more, its Welford steps give NaN or +-inf
    # depending on where the infinity sits: docs/testing.md).
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*torch.var_mean(x, -1), *torch.var_mean(x.t(), 0))

    inf, nan = float("inf"), float("nan")
    rows = [
        [inf] + [1.0] * (length - 1),
        [-inf] * length,
        [1.0] * (length - 1) + [inf],
        [inf] + [-inf] * (length - 1),
        [nan] + [2.0] * (length - 1),
        [3.0] * length,
    ]
    x = torch.tensor(rows)
    compiled = inductor_ir.compile_graph(make_fx(fn)(x), [x], backends={"cpu": backend})
    var, mean, var_t, mean_t = compiled(x)
    finite = torch.tensor([all(v == v and abs(v) != inf for v in row) for row in rows])
    for got_var, got_mean in ((var, mean), (var_t, mean_t)):
        torch.testing.assert_close(got_mean, x.mean(-1), equal_nan=True)
        assert got_var[~finite].isnan().all()
        torch.testing.assert_close(got_var[finite], x[finite].var(-1), equal_nan=True)  # one element: 0 / 0
    if length == 1:
        for got, want in zip(compiled(x), fn(x)):
            torch.testing.assert_close(got, want, equal_nan=True)
