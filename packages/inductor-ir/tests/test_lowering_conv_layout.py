"""Convolution graphs on CUDA store feature maps channels-last: an input image is copied to that layout
before the first convolution, so its result and the kernels reading it need no layout change.
Compared with eager on fresh inputs (codegen-triton reruns these on the GPU, where the layout applies)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from inductor_ir_testing import check_interpret, rand

import inductor_ir

aten = torch.ops.aten


def _stem(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """A ResNet stem: strided convolution, per-channel scale, ReLU, max pooling."""
    y = torch.relu(F.conv2d(x, w, stride=2, padding=3) * scale.view(1, -1, 1, 1))
    return F.max_pool2d(y, 3, 2, 1)


def _full_float32() -> Any:
    """cuDNN without TF32: another layout picks another algorithm, whose TF32 rounding differs from
    eager's by ~4e-3; in float32 both agree to the tests' tolerance."""
    return torch.backends.cudnn.flags(enabled=True, allow_tf32=False)


def test_convolution_stem_of_an_input_image() -> None:
    with _full_float32():
        program = check_interpret(_stem, lambda: [rand(2, 3, 32, 32), rand(8, 3, 7, 7), rand(8)])
    (conv,) = [b for b in program.buffers if isinstance(b, inductor_ir.ExternKernel) and b.op is aten.convolution.default]
    image = conv.args[0]
    # On CUDA and CPU alike, the image is copied channels-last (a computed buffer); the result comes
    # back channels-last.
    assert isinstance(image, inductor_ir.ComputedBuffer)
    assert int(image.layout.stride[1]) == 1 and int(conv.layout.stride[1]) == 1


def test_two_convolutions_of_one_input_image() -> None:
    def fn(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w1, padding=1).relu() + F.conv2d(x, w2, padding=1)

    with _full_float32():
        check_interpret(fn, lambda: [rand(2, 4, 12, 12), rand(6, 4, 3, 3), rand(6, 4, 3, 3)])
