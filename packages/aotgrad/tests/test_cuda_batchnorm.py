"""BatchNorm's running statistics on CUDA, where aten.batch_norm dispatches to cudnn_batch_norm."""

from __future__ import annotations

import copy

import pytest
import torch

import aotgrad


@pytest.mark.gpu
def test_cudnn_batch_norm_updates_running_stats_like_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU(inplace=True)
    ).cuda()
    compiled_model = copy.deepcopy(model)
    compiled = aotgrad.aot_module(compiled_model, fw_compiler=aotgrad.eager_compiler, bw_compiler=aotgrad.eager_compiler)
    x = torch.randn(8, 3, 32, 32, device="cuda")
    for _ in range(2):
        expected, actual = model(x), compiled(x)
        expected.sum().backward()
        actual.sum().backward()
    # cuDNN convolutions may use TF32 and pick different algorithms: tolerances fit that.
    torch.testing.assert_close(actual, expected, rtol=1e-2, atol=1e-2)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        torch.testing.assert_close(getattr(compiled_model[1], name), getattr(model[1], name), rtol=1e-2, atol=1e-3)
    torch.testing.assert_close(compiled_model[0].weight.grad, model[0].weight.grad, rtol=5e-2, atol=5e-2)
