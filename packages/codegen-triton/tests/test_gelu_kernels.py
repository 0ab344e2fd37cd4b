"""GPT-2's tanh GELU: `x ** 3` is written as products, as eager's CUDA kernels do, not as a `pow` call."""

from __future__ import annotations

import math

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def gelu_of_reshaped(h: torch.Tensor, exponent: float) -> torch.Tensor:
    """transformers' NewGELU on a (B*T, D) matmul output viewed as (B, T, D)."""
    x = h.view(2, 8, h.shape[-1])
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, exponent))))


def _compile(backend: TritonBackend, exponent: float) -> tuple[str, inductor_ir.CompiledGraph]:
    h = torch.randn(16, 40)
    gm = make_fx(lambda t: gelu_of_reshaped(t, exponent))(h)
    compiled = inductor_ir.compile_graph(gm, [h], backends={"cpu": backend})
    fresh = torch.randn(16, 40)
    torch.testing.assert_close(compiled(fresh), gelu_of_reshaped(fresh, exponent), rtol=1e-5, atol=1e-5, equal_nan=True)
    (source,) = compiled.sources
    return source.source, compiled


def test_gelu_cubes_by_multiplying(cpu_backend: TritonBackend) -> None:
    source, _ = _compile(cpu_backend, 3.0)
    assert "libdevice.pow" not in source, source
    other, _ = _compile(cpu_backend, 2.5)
    assert "libdevice.pow" in other


def test_a_square_gradients_first_power_is_the_value_itself(cpu_backend: TritonBackend) -> None:
    # The backward of x.pow(2) reads 2 * x ** 1.0: no pow call, and the same values (nan and inf too).
    def square_grad(x: torch.Tensor) -> torch.Tensor:
        return torch.pow(x, 1.0) * 2.0

    x = torch.randn(64)
    gm = make_fx(square_grad)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": cpu_backend})
    (source,) = compiled.sources
    assert "libdevice.pow" not in source.source, source.source
    fresh = torch.randn(64)
    fresh[:4] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0])
    torch.testing.assert_close(compiled(fresh), square_grad(fresh), rtol=0, atol=0, equal_nan=True)
    assert torch.signbit(compiled(fresh)[3])
