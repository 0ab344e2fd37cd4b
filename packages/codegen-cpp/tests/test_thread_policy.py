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
