"""A symbol an input gives only inside a stride (`s + 1`, the diagonal of a padded tensor) is read
from that stride: the backward kernel that read the diagonal named `s` without being given it and
failed to compile (fuzz aadc5753b7)."""

from __future__ import annotations

import torch

import frontend


def _program(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    t = a.diagonal().bitwise_xor_(300)
    return t % w


def _inputs(row_stride: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    storage = torch.randint(-50, 50, (4 * row_stride,), generator=generator, dtype=torch.int16)
    a = storage.as_strided((4, 4), (row_stride, 1))
    w = (torch.rand(1, generator=generator) + 0.5).requires_grad_(True)
    return a, w


def test_the_diagonal_of_inputs_with_symbolic_row_strides_compiles() -> None:
    compiled = frontend.compile(_program, dynamic=True, options={"fallback_to_eager": False})
    for row_stride, seed in ((4, 0), (6, 1), (9, 2)):
        a, w = _inputs(row_stride, seed)
        a_eager, w_eager = a.clone(), w.detach().clone().requires_grad_(True)
        got = compiled(a, w)
        want = _program(a_eager, w_eager)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(a, a_eager)
        (grad,) = torch.autograd.grad(got.sum(), w)
        (grad_eager,) = torch.autograd.grad(want.sum(), w_eager)
        torch.testing.assert_close(grad, grad_eager)
