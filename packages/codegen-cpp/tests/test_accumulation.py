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


def test_long_rows_variance_in_double_lanes(backend: CppBackend) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.var_mean(x, dim=1)

    def inputs() -> torch.Tensor:
        # Rows longer than a row array holds (16,384), not split (520 outputs): Welford's update in
        # the loop, in double lanes (a CPU variance's moments are float64); mean 1e4, spread 1e-2
        return torch.randn(520, 16400) * 1e-2 + 1e4

    compiled, sources = _compile(backend, fn, inputs())
    assert "_vmean = kiln::splat<kiln::f64x>" in sources and "_bmean" not in sources and "row_moments" not in sources
    assert not any(n.reduction_type == "welford_combine" for g in compiled.schedule.kernel_groups for n in g.nodes)
    x = inputs()
    kiln_var, kiln_mean = compiled(x)
    reference_var, reference_mean = torch.var_mean(x.double(), dim=1)
    eager_var, eager_mean = torch.var_mean(x, dim=1)
    assert _relative_error(kiln_var, reference_var) <= max(4 * _relative_error(eager_var, reference_var), 1e-6)
    _assert_as_exact_as_eager(kiln_mean, eager_mean, reference_mean)


def test_variance_of_values_whose_squares_overflow_float32(backend: CppBackend) -> None:
    # Values near 9e18 (int64's range as float32): the variance (~3e37) is a float32 value, the sum
    # of squared deviations is not; eager's CPU variance runs in double, and so do Kiln's moments.
    def fn(x: torch.Tensor, rows: torch.Tensor, long: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.var(), rows.std(-1), torch.var_mean(long, -1)[0]

    def inputs() -> list[torch.Tensor]:
        return [((torch.rand(shape, dtype=torch.float64) * 2 - 1) * 9.2e18).float() for shape in ((4, 7), (8, 300), (600, 17000))]

    compiled, _ = _compile(backend, fn, *inputs())
    fresh = inputs()
    for actual, expected in zip(compiled(*fresh), fn(*fresh)):
        assert bool(torch.isfinite(actual).all())
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=0)


def test_row_moments_large_mean_small_variance(backend: CppBackend) -> None:
    # Rows up to 16,384 elements: the moments are taken after the loop by two passes over the row
    # (kiln::row_moments), read in place from an input, or from the row array the loop fills with a
    # computed value (softmax + x, which the layer norm's last loop then loads instead of a copy).
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        var, mean = torch.var_mean(x, dim=1)
        mixed = torch.softmax(w, dim=-1) + w
        mixed_var, mixed_mean = torch.var_mean(mixed, dim=-1, keepdim=True, correction=0)
        return var, mean, (mixed - mixed_mean) * torch.rsqrt(mixed_var + 1e-5)

    def inputs() -> tuple[torch.Tensor, torch.Tensor]:
        # 5,000 per row: two of row_moments' float32 blocks and a scalar tail of 8
        return torch.randn(64, 5000) * 1e-2 + 1e4, torch.randn(16, 5000) * 0.1 + 300.0

    compiled, sources = _compile(backend, fn, *inputs())
    assert "kiln::row_moments(in_ptr" in sources and "_row[5000]" in sources and "_bmean" not in sources
    assert sources.count("kiln::store(acc") == 1 and "kiln::load(acc" in sources.split("row_moments(acc")[1]
    x, w = inputs()
    kiln_var, kiln_mean, kiln_norm = compiled(x, w)
    reference_var, reference_mean = torch.var_mean(x.double(), dim=1)
    eager_var, eager_mean = torch.var_mean(x, dim=1)
    assert _relative_error(kiln_var, reference_var) <= max(4 * _relative_error(eager_var, reference_var), 1e-6)
    _assert_as_exact_as_eager(kiln_mean, eager_mean, reference_mean)
    mixed = torch.softmax(w.double(), dim=-1) + w.double()
    reference_norm = torch.nn.functional.layer_norm(mixed, (w.shape[-1],))
    eager_norm = torch.nn.functional.layer_norm(torch.softmax(w, dim=-1) + w, (w.shape[-1],))
    eager_error = float((eager_norm - reference_norm).abs().max())
    assert float((kiln_norm.double() - reference_norm).abs().max()) <= max(4 * eager_error, 1e-4)


def test_row_moments_of_constant_and_special_rows(backend: CppBackend) -> None:
    # A constant row has no spread (never a negative variance from rounding); NaN and infinity give
    # NaN as eager's do; every tail length of a short row.
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.var_mean(x * 1.0, dim=-1)

    for length in (1, 5, 16, 17, 40):
        x = torch.randn(6, length)
        x[0] = 7.3
        x[1, -1] = float("nan")
        x[2, length // 2] = float("inf")
        compiled, sources = _compile(backend, fn, x)
        assert "row_moments" in sources
        kiln_var, kiln_mean = compiled(x)
        eager_var, eager_mean = torch.var_mean(x, dim=-1)
        if length > 1:
            assert float(kiln_var[0]) == 0.0
        assert torch.equal(kiln_var[:3].isnan(), eager_var[:3].isnan()), (length, kiln_var, eager_var)
        torch.testing.assert_close(kiln_var[3:], eager_var[3:], rtol=1e-5, atol=1e-6, equal_nan=True)
        torch.testing.assert_close(kiln_mean[3:], eager_mean[3:], rtol=1e-5, atol=1e-6)
        assert bool(kiln_mean[1].isnan()) and float(kiln_mean[0]) == float(eager_mean[0])


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
