"""``addmm``: on CUDA in float32 an ``mm`` call whose bias add fuses into the consumers; elsewhere one
``addmm`` call. Compared with eager on fresh inputs (codegen-triton reruns these on the GPU)."""

from __future__ import annotations

import torch
from inductor_ir_testing import check_interpret, rand

import inductor_ir

aten = torch.ops.aten


def _externs(program: inductor_ir.Program, op: object) -> list[inductor_ir.ExternKernel]:
    return [b for b in program.buffers if isinstance(b, inductor_ir.ExternKernel) and b.op is op]


def _on_cuda_float32(program: inductor_ir.Program) -> bool:
    return any(b.layout.device.startswith("cuda") and b.layout.dtype == torch.float32 for b in program.graph_inputs)


def _linear_residual_relu(b: torch.Tensor, x: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.addmm(b, x, w.t()) + r)


def test_addmm_with_a_residual_epilogue() -> None:
    program = check_interpret(_linear_residual_relu, lambda: [rand(24), rand(40, 16), rand(24, 16), rand(40, 24)])
    if _on_cuda_float32(program):
        assert not _externs(program, aten.addmm.default)
        assert len(_externs(program, aten.mm.default)) == 1
        # The bias add runs inside the epilogue kernel: one computed buffer for add, residual and relu.
        assert len([b for b in program.buffers if isinstance(b, inductor_ir.ComputedBuffer)]) == 1
    else:
        assert len(_externs(program, aten.addmm.default)) == 1


def test_addmm_as_graph_output_and_feeding_another_matmul() -> None:
    def fn(b: torch.Tensor, x: torch.Tensor, w: torch.Tensor, w2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = torch.addmm(b, x, w)
        return hidden, torch.mm(hidden, w2)

    # No user computes on `hidden`: a split add would be a kernel of its own, so it stays one call.
    program = check_interpret(fn, lambda: [rand(12), rand(9, 7), rand(7, 12), rand(12, 5)])
    assert len(_externs(program, aten.addmm.default)) == 1


def test_addmm_with_scaled_terms_or_a_2d_bias_stays_one_call() -> None:
    def scaled(b: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.addmm(b, x, w, beta=0.5, alpha=2.0)

    def full_bias(b: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.addmm(b, x, w)

    program = check_interpret(scaled, lambda: [rand(6), rand(5, 4), rand(4, 6)])
    assert len(_externs(program, aten.addmm.default)) == 1
    program = check_interpret(full_bias, lambda: [rand(5, 6), rand(5, 4), rand(4, 6)])
    assert len(_externs(program, aten.addmm.default)) == 1


def test_half_precision_addmm_stays_one_call() -> None:
    def inputs() -> list[torch.Tensor]:
        return [rand(*shape, dtype=torch.bfloat16) for shape in ((24,), (40, 16), (24, 16), (40, 24))]

    program = check_interpret(_linear_residual_relu, inputs)
    assert len(_externs(program, aten.addmm.default)) == 1
