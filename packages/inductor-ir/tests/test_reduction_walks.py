"""Reductions that share an iteration space only because a tensor is square (tokens == hidden) are
not fused when one sums rows and the other columns: one kernel would read across its tiles."""

from __future__ import annotations

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.scheduler import KernelStep


def _norm_backward(x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # An RMS norm's input gradient (row sums over hidden) and weight gradient (column sums over tokens).
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    dxhat = dy * w
    dx = rstd * (dxhat - x * rstd * rstd * (dxhat * x).mean(-1, keepdim=True))
    return dx, (dy * x * rstd).sum(0)


def _kernel_writing(compiled: inductor_ir.CompiledGraph, position: int) -> str:
    output = compiled.program.outputs[position]
    name = output.data.name if isinstance(output, inductor_ir.ReinterpretView) else output.name
    for step in compiled.schedule.steps:
        if isinstance(step, KernelStep) and name in {r.name for r in step.group.outputs}:
            return step.group.name
    raise AssertionError(f"no kernel writes output {position}")


def test_square_row_and_column_sums_stay_in_separate_kernels() -> None:
    torch.manual_seed(0)
    n = 64
    example = [torch.randn(n, n), torch.randn(n), torch.randn(n, n)]
    compiled = inductor_ir.compile_graph(
        make_fx(_norm_backward)(*example), example, backends={"cpu": ReferenceBackend()}
    )
    assert _kernel_writing(compiled, 0) != _kernel_writing(compiled, 1)
    fresh = [torch.randn(n, n), torch.randn(n), torch.randn(n, n)]
    assert_close(list(compiled(*fresh)), list(_norm_backward(*fresh)))


def test_row_sums_of_one_walk_still_fuse() -> None:
    def two_row_sums(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x * y).sum(1), (x + y).amax(1)

    torch.manual_seed(0)
    example = [torch.randn(64, 64), torch.randn(64, 64)]
    compiled = inductor_ir.compile_graph(
        make_fx(two_row_sums)(*example), example, backends={"cpu": ReferenceBackend()}
    )
    assert _kernel_writing(compiled, 0) == _kernel_writing(compiled, 1)
    fresh = [torch.randn(64, 64), torch.randn(64, 64)]
    assert_close(list(compiled(*fresh)), list(two_row_sums(*fresh)))
