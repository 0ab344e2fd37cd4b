"""Kernels whose loads read one element (0-d and one-element inputs) compute as eager.

Such loads read through a one-element block pointer, so each value is a block: Triton's interpreter
gives `scalar < scalar` the operands' dtype, and a comparison of two loaded scalars combined with a
block (`x < lo` & `lo < hi`, the backward of `clamp` with tensor bounds) failed there with numpy's
bitwise_and on float operands.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def _clamp_grads(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    x, lo, hi = (t.detach().requires_grad_() for t in (x, lo, hi))
    return torch.autograd.grad(torch.clamp(x, lo, hi), (x, lo, hi), g)


def _nan_to_num_grad(x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    one = x[:1].reshape(1, 1).detach().requires_grad_()
    (grad,) = torch.autograd.grad(torch.nan_to_num(one), one, g[:1].reshape(1, 1))
    return grad, (lo < hi) & (x < lo), torch.where(lo < hi, x, g)


def _inputs(generator: torch.Generator) -> list[torch.Tensor]:
    x = torch.randn(6, generator=generator)
    lo, hi = -torch.rand((), generator=generator) - 0.1, torch.rand((), generator=generator) + 0.1
    x[:2] = torch.stack([lo - 1, hi + 1])  # one value below the bounds, one above
    return [x, lo, hi, torch.randn(6, generator=generator)]


@pytest.mark.parametrize("program", (_clamp_grads, _nan_to_num_grad), ids=lambda p: p.__name__)
def test_one_element_loads_match_eager(cpu_backend: TritonBackend, program: Callable[..., tuple[torch.Tensor, ...]]) -> None:
    inputs = _inputs(torch.Generator().manual_seed(13))
    gm = make_fx(program, decomposition_table=inductor_ir.decompositions())(*inputs)
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": cpu_backend})
    for got, want in zip(compiled(*inputs), program(*inputs), strict=True):
        torch.testing.assert_close(got, want)  # sums of gradients: a different summation order



def _normalize_backward(expanded: torch.Tensor, y: torch.Tensor, positive: torch.Tensor,
                        g: torch.Tensor) -> tuple[torch.Tensor]:
    """`normalize`'s backward as aotgrad partitions it: `expanded` is the norm `expand`ed to x's size."""
    total = (-g * (y / expanded)).sum(0, keepdim=True)
    return (g / expanded + torch.where(positive, total, 0.0) * y,)


def test_loads_from_an_empty_buffer_read_no_memory(cpu_backend: TritonBackend) -> None:
    """The backward of `normalize` over zero elements reads the saved norm `expand`ed to size 0
    (stride 0: an empty tensor with no memory) at the constant index 0, with no mask, in a kernel of
    one row (the sum over zero elements): it read a null pointer (SIGSEGV in Triton's interpreter)."""
    generator = torch.Generator().manual_seed(5)
    inputs = [torch.empty_strided((0,), (0,)), torch.randn(0, generator=generator), torch.tensor([True]),
              torch.randn(0, generator=generator)]
    gm = make_fx(_normalize_backward, decomposition_table=inductor_ir.decompositions())(*inputs)
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": cpu_backend})
    for got, want in zip(compiled(*inputs), _normalize_backward(*inputs), strict=True):
        torch.testing.assert_close(got, want)
