"""A computed operand much smaller than the CPU result it is broadcast over is stored first
(``LoweringContext.broadcast_operand``): a batch norm's ``rsqrt(var + eps) * weight`` over (C,) runs
once per channel, not once per element of the (N, C, H, W) result. Compared with eager on fresh inputs."""

from __future__ import annotations

import torch
from inductor_ir_testing import check_interpret, rand

import inductor_ir


def _normalize(x: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Inference batch norm and ReLU as the decomposition writes it."""
    scale = torch.rsqrt(var + 1e-5) * w
    return torch.relu(x * scale.view(1, -1, 1, 1) + (b - mean * scale).view(1, -1, 1, 1))


def _computed(program: inductor_ir.Program) -> list[inductor_ir.ComputedBuffer]:
    return [b for b in program.buffers if isinstance(b, inductor_ir.ComputedBuffer)]


def _numel(buffer: inductor_ir.ComputedBuffer) -> int:
    return int(torch.Size(int(s) for s in buffer.layout.size).numel())


def test_a_per_channel_scale_is_stored_before_the_large_kernel() -> None:
    program = check_interpret(
        _normalize, lambda: [rand(4, 16, 32, 32, layout="channels_last"), rand(16), rand(16).abs(), rand(16), rand(16)]
    )
    sizes = sorted(_numel(b) for b in _computed(program))
    # the scale and the shift, each over the 16 channels, then the result
    assert sizes == [16, 16, 4 * 16 * 32 * 32], sizes


def test_small_results_keep_their_operands_inline() -> None:
    program = check_interpret(_normalize, lambda: [rand(2, 16, 8, 8), rand(16), rand(16).abs(), rand(16), rand(16)])
    assert [_numel(b) for b in _computed(program)] == [2 * 16 * 8 * 8]


def test_an_operand_of_one_load_stays_inline() -> None:
    # a view of an input, or a one-op body reading one buffer: storing it saves nothing
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * (w * 2).view(1, -1, 1, 1)

    program = check_interpret(fn, lambda: [rand(4, 16, 32, 32), rand(16)])
    assert [_numel(b) for b in _computed(program)] == [4 * 16 * 32 * 32]


def test_half_operands_round_as_inlined_ones_do() -> None:
    def fn(x: torch.Tensor, v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * (torch.rsqrt(v + 1e-3) * w).view(1, -1, 1)

    program = check_interpret(
        fn, lambda: [rand(64, 32, 512, dtype=torch.float16), rand(32, dtype=torch.float16).abs(), rand(32, dtype=torch.float16)]
    )
    assert sorted(_numel(b) for b in _computed(program)) == [32, 64 * 32 * 512]
