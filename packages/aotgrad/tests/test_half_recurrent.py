"""Half-precision recurrent layers are traced in float32, as eager's fused kernels compute them.

Decomposed in bfloat16, every intermediate of an LSTM cell was rounded: where the new cell state
cancels (``f * c + i * g`` near 0) it came out a quarter of its value off, where eager's fused
kernel, computing in float32, was within bfloat16's rounding of the float64 result (eager_recurrent.py).
"""

from __future__ import annotations

import torch
from aotgrad_helpers import strict

import aotgrad


def _lstm_state(x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
    return torch.lstm(x, [h0, c0], list(weights), True, 1, 0.0, False, False, True)[2]


def _inputs(dtype: torch.dtype, generator: torch.Generator) -> list[torch.Tensor]:
    shapes = [(1000, 1, 4), (1, 1000, 2), (1, 1000, 2), (8, 4), (8, 2), (8,), (8,)]  # 1000 cells of one step
    return [torch.randn(shape, generator=generator).to(dtype) for shape in shapes]


def test_bfloat16_cells_stay_as_close_as_eager() -> None:
    compiled = aotgrad.aot_function(_lstm_state, fw_compiler=aotgrad.eager_compiler, config=strict())
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        inputs = _inputs(torch.bfloat16, generator)
        reference = _lstm_state(*(t.double() for t in inputs))
        eager_error = (_lstm_state(*inputs).double() - reference).abs().max().item()
        compiled_error = (compiled(*inputs).double() - reference).abs().max().item()
        assert compiled_error <= 1.5 * eager_error + 1e-3, (compiled_error, eager_error)


def test_a_bfloat16_lstm_still_differentiates() -> None:
    # Gradients flow through the casts: bfloat16 gradients, eager's within bfloat16 rounding.
    def loss(*inputs: torch.Tensor) -> torch.Tensor:
        return _lstm_state(*inputs).float().square().sum()

    compiled = aotgrad.aot_function(loss, fw_compiler=aotgrad.eager_compiler, config=strict())
    generator = torch.Generator().manual_seed(1)
    inputs = _inputs(torch.bfloat16, generator)
    grads = []
    for f in (loss, compiled):
        leaves = [t.clone().requires_grad_(True) for t in inputs]
        grads.append(torch.autograd.grad(f(*leaves), leaves))
    for got, want in zip(grads[1], grads[0], strict=True):
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got, want, rtol=0.05, atol=0.05)
