"""Which kernels run on threads: pointwise work from two grains of ``parallel_threshold`` elements, kernels
that reduce rows (layer norm, softmax) from a sixteenth of that, as ATen splits them by rows."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def _compile(fn: object, inputs: list[torch.Tensor], backend: CppBackend) -> inductor_ir.CompiledGraph:
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*inputs)  # type: ignore[arg-type]
    return inductor_ir.compile_graph(gm, inputs, backends={"cpu": backend})


@pytest.mark.parametrize("rows", [8, 64])
def test_row_reductions_of_a_small_batch_run_on_threads(backend: CppBackend, rows: int) -> None:
    torch.manual_seed(0)
    x, weight, bias = torch.randn(rows, 512), torch.randn(512), torch.randn(512)

    def layer_norm_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (512,), weight, bias)) + x

    compiled = _compile(layer_norm_gelu, [x, weight, bias], backend)
    source = "\n".join(s.source for s in compiled.sources)
    assert ("#pragma omp parallel" in source) == (rows * 512 >= 2 * 32768 // 16)
    torch.testing.assert_close(compiled(x, weight, bias), layer_norm_gelu(x, weight, bias))


def test_small_pointwise_work_stays_serial(backend: CppBackend) -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 512)
    compiled = _compile(lambda x: torch.sigmoid(x) * x + 1, [x], backend)
    assert not any("#pragma omp" in s.source for s in compiled.sources)
    torch.testing.assert_close(compiled(x), torch.sigmoid(x) * x + 1)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_column_reductions_split_their_rows_across_threads(backend: CppBackend, threads: int) -> None:
    """A sum, max and min over the rows of a long narrow matrix: each thread reduces a contiguous share
    of the rows (1001 rows do not divide among 2 or 3 threads; 520 columns leave a scalar tail), and the
    shares fold in thread order, so the same thread count gives the same bits every call."""
    torch.manual_seed(0)
    x, scale = torch.randn(1001, 520), torch.rand(520) + 0.5

    def column_stats(x: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x * scale
        return y.sum(0), y.amax(0), y.amin(0), (x > 1.5).any(0)

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        compiled = _compile(column_stats, [x, scale], backend)
        source = "\n".join(s.source for s in compiled.sources)
        assert "rows split across threads" in source
        first = compiled(x, scale)
        again = compiled(x, scale)
    finally:
        torch.set_num_threads(previous)
    expected = column_stats(x, scale)
    torch.testing.assert_close(first[0], expected[0], rtol=1e-4, atol=1e-4)  # eager sums in float32
    # A row counted twice or missed would be off by about 1: compare with the double sum too.
    exact = (x * scale).double().sum(0)
    torch.testing.assert_close(first[0].double(), exact, rtol=1e-5, atol=1e-4)
    for got, want in zip(first[1:], expected[1:]):
        assert torch.equal(got, want)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
