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
