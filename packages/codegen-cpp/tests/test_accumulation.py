"""Blocked float32 accumulation (codegen/reduction.py) and tiled column reductions (codegen/tiling.py).

Long float32 sums and Welford reductions accumulate in float32 lanes per block and fold the
blocks into double lanes. Each test compares Kiln and eager with a float64 reference on long
reductions: Kiln's error must stay within a small multiple of eager's (and of float32's
resolution), and the generated code must really take the path under test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def _compile(backend: CppBackend, fn: Callable[..., Any], *inputs: torch.Tensor) -> tuple[Any, str]:
    gm = make_fx(fn)(*inputs)
    compiled = inductor_ir.compile_graph(gm, list(inputs), backends={"cpu": backend})
    sources = "\n".join(text for name, text in compiled.artifacts().items() if name.startswith("kernel"))
    return compiled, sources


def _relative_error(actual: torch.Tensor, reference: torch.Tensor) -> float:
    """Worst error relative to the reference's magnitude (per output)."""
    return float(((actual.double() - reference).abs() / reference.abs().clamp_min(1e-30)).max())


def _assert_as_exact_as_eager(kiln: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor) -> None:
    """Kiln's error against float64 is at most 4x eager's, or a few float32 roundings."""
    kiln_error, eager_error = _relative_error(kiln, reference), _relative_error(eager, reference)
    assert kiln_error <= max(4 * eager_error, 4e-7), (kiln_error, eager_error)


def test_long_sums_accumulate_float32_blocks_as_exactly_as_eager(backend: CppBackend) -> None:
    def fn(flat: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return flat.sum(), rows.sum(dim=1)

    flat = torch.rand(1 << 20) + 3.0  # one long sum, split across threads
    rows = torch.rand(6, 50003) * 2 + 7.0  # blocked rows with a scalar tail
    compiled, sources = _compile(backend, fn, flat, rows)
    assert "_blk = kiln::splat<kiln::f32x>" in sources and "r0_block" in sources
    flat, rows = torch.rand(1 << 20) + 3.0, torch.rand(6, 50003) * 2 + 7.0
    kiln_flat, kiln_rows = compiled(flat, rows)
    _assert_as_exact_as_eager(kiln_flat, flat.sum(), flat.double().sum())
    _assert_as_exact_as_eager(kiln_rows, rows.sum(dim=1), rows.double().sum(dim=1))


def test_tiled_column_sums_with_blocks_and_tails(backend: CppBackend) -> None:
    def fn(x: torch.Tensor, short: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.sum(dim=0), (short * 2).amax(dim=0)

    # 300 columns: tiles of 4 vectors (the last one partial) and a scalar tail of 12 columns.
    x, short = torch.rand(5000, 300) + 10.0, torch.randn(7, 300)
    compiled, sources = _compile(backend, fn, x, short)
    assert "vectors of outputs at once" in sources and "_blk[kiln_c]" in sources
    x, short = torch.rand(5000, 300) + 10.0, torch.randn(7, 300)
    kiln_sum, kiln_max = compiled(x, short)
    _assert_as_exact_as_eager(kiln_sum, x.sum(dim=0), x.double().sum(dim=0))
    torch.testing.assert_close(kiln_max, (short * 2).amax(dim=0), rtol=0, atol=0)


def test_blocked_welford_large_mean_small_variance(backend: CppBackend) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        var, mean = torch.var_mean(x, dim=1)
        return var, mean, torch.nn.functional.layer_norm(w, (w.shape[-1],))

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        # 5M elements in rows of 5000 (two float32 blocks each, not split), mean 1e4, spread 1e-2
        return torch.randn(1024, 5000) * 1e-2 + 1e4, torch.randn(16, 5000) * 0.1 + 300.0

    compiled, sources = _compile(backend, fn, *inputs())
    assert "_bmean" in sources and "_shift" in sources and "r0_block" in sources
    assert not any(n.reduction_type == "welford_combine" for g in compiled.schedule.kernel_groups for n in g.nodes)
    x, w = inputs()
    kiln_var, kiln_mean, kiln_norm = compiled(x, w)
    reference_var, reference_mean = torch.var_mean(x.double(), dim=1)
    eager_var, eager_mean = torch.var_mean(x, dim=1)
    assert _relative_error(kiln_var, reference_var) <= max(4 * _relative_error(eager_var, reference_var), 1e-6)
    _assert_as_exact_as_eager(kiln_mean, eager_mean, reference_mean)
    reference_norm = torch.nn.functional.layer_norm(w.double(), (w.shape[-1],))
    eager_error = float((torch.nn.functional.layer_norm(w, (w.shape[-1],)) - reference_norm).abs().max())
    assert float((kiln_norm.double() - reference_norm).abs().max()) <= max(4 * eager_error, 1e-4)


def test_split_welford_partials_keep_large_mean_variance_exact(backend: CppBackend) -> None:
    # Few outputs over long rows: inductor_ir splits the Welford reduction in two stages; the partial
    # (mean, m2) pairs between them are stored in float64 on the CPU (float32 partials: error 2e-4).
    def fn(rows: torch.Tensor, images: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*torch.var_mean(rows, dim=1), *torch.var_mean(images, dim=[0, 2, 3]))

    def inputs() -> list[torch.Tensor]:
        return [torch.randn(8, 131072) * 1e-2 + 1e4, torch.randn(4, 3, 64, 64) * 1e-2 + 1e4]

    compiled, sources = _compile(backend, fn, *inputs())
    assert "welford" in sources.lower() or "m2" in sources
    fresh = inputs()
    reference = fn(*(x.double() for x in fresh))
    for kiln, eager, exact in zip(compiled(*fresh), fn(*fresh), reference):
        _assert_as_exact_as_eager(kiln, eager, exact)
