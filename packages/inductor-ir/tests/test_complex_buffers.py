"""Complex tensors flow through programs as buffers that ATen calls make and read: generated kernels
compute on real values only, so every op reading or making a complex tensor is a FallbackKernel."""

from __future__ import annotations

from typing import Any

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.ir.nodes import ComputedBuffer


def _spectrum(x: torch.Tensor, w: torch.Tensor) -> Any:
    # real -> complex (fft, a cast), complex pointwise (mul by a complex tensor and a complex scalar,
    # abs), a view of a complex buffer (view_as_real), complex -> real (irfft), real kernels around
    spectrum = torch.fft.rfft(x.sin(), dim=-1) * torch.polar(w.abs(), w) * 1j + w.to(torch.complex64)
    return torch.fft.irfft(spectrum, n=x.shape[-1]) + x, torch.view_as_real(spectrum).sum(-1), spectrum.abs()


def test_complex_values_are_fallback_buffers_and_match_eager() -> None:
    example = [rand(3, 8), rand(5)]
    gm = make_fx(_spectrum)(*example)
    program = inductor_ir.lower(gm, example)
    assert not program.lowering_errors
    computed = [b for b in program.buffers if isinstance(b, ComputedBuffer)]
    assert computed, "the real-valued ops around the complex ones still become kernels"
    assert not [b.name for b in computed if b.layout.dtype.is_complex]
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": ReferenceBackend()})
    fresh = [rand(3, 8), rand(5)]
    expected = _spectrum(*fresh)
    got = compiled(*fresh)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
