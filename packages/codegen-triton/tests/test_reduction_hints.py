"""Reductions are classified by how their loads walk memory; the hint picks the launch configurations
tried (`candidate_configs`). Each graph is also checked against eager on fresh inputs."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def _hints(fn: Callable[..., torch.Tensor], shapes: list[tuple[int, ...]], backend: TritonBackend) -> list[str]:
    example = [torch.randn(*shape) for shape in shapes]
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": backend})
    fresh = [torch.randn(*shape) for shape in shapes]
    torch.testing.assert_close(compiled(*fresh), fn(*fresh), rtol=1e-4, atol=1e-4)
    return [source.generated.hint for source in compiled.sources if "_red_" in source.name]


def test_row_and_column_sums(cpu_backend: TritonBackend) -> None:
    assert _hints(lambda x: x.sum(1), [(8, 3000)], cpu_backend) == ["inner"]
    assert _hints(lambda x: x.sum(0), [(3000, 8)], cpu_backend) == ["outer"]


def test_most_loads_decide_a_mixed_reduction(cpu_backend: TritonBackend) -> None:
    # A layer-norm weight gradient reads each row's statistics (contiguous along the reduction) and
    # three full matrices (contiguous along the outputs): it walks memory as a column sum.
    def weight_grad(x: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, dy: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return ((x - mean[:, None]) * rstd[:, None] * dy * z).sum(0)

    shapes = [(3000, 16), (3000,), (3000,), (3000, 16), (3000, 16)]
    assert _hints(weight_grad, shapes, cpu_backend) == ["outer"]
    # One load each way: a tie counts as inner.
    assert _hints(lambda x, w: (x.t() * w).sum(1), [(3000, 16), (3000,)], cpu_backend) == ["inner"]


def test_a_column_sum_over_a_few_thousand_rows_is_split(cpu_backend: TritonBackend) -> None:
    # 100 columns are 2 programs of 64: the rows are cut into chunks (grid axis 1), each summed on
    # its own, then the partial sums are added; the last chunk is partly past the end.
    example = [torch.randn(3000, 100)]
    gm = make_fx(lambda x: (x * x).sum(0))(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": cpu_backend})
    (generated,) = [source.generated for source in compiled.sources if "_red_" in source.name]
    assert generated.split >= 2 and generated.hint == "outer"
    fresh = torch.randn(3000, 100)
    torch.testing.assert_close(compiled(fresh), (fresh * fresh).sum(0), rtol=1e-5, atol=1e-4)
