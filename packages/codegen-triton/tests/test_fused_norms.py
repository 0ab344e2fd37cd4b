"""Batch-norm and layer-norm patterns whose pointwise terms fuse into their reductions' kernels.

The batch-norm backward's pointwise terms loop over ``(N, C, HW)`` while its per-channel sums reduce
over ``(C,) x (N, HW)``: they run inside the reduction loop, and when the reduction is long and has
few outputs the split reduction's first kernel stores them chunk by chunk.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def batch_norm_backward(x: torch.Tensor, grad: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor) -> Any:
    """The ops autograd records for a decomposed training batch norm followed by ReLU."""
    m, r, w = mean[None, :, None], rstd[None, :, None], weight[None, :, None]
    xhat = (x - m) * r
    g = torch.where(torch.relu(xhat * w) <= 0, torch.zeros((), dtype=x.dtype, device=x.device), grad)
    sum_gc = (g * w * (x - m)).sum((0, 2), keepdim=True)
    scaled = g * w * r  # used by two consumers: a realized buffer
    sum_neg = (-scaled).sum((0, 2), keepdim=True)
    count = x.shape[0] * x.shape[2]
    dx = scaled + sum_neg / count + (sum_gc * -(r**3) / count) * (x - m)
    return dx, g.sum((0, 2)), (g * xhat).sum((0, 2))


def _inputs(n: int, c: int, hw: int, device: str) -> tuple[torch.Tensor, ...]:
    shapes = [(n, c, hw), (n, c, hw), (c,), (c,), (c,)]
    tensors = [torch.randn(*s) for s in shapes]
    tensors[3] = tensors[3].abs() + 0.5
    return tuple(t.to(device) for t in tensors)


def _check(backend: TritonBackend, device: str, n: int, c: int, hw: int) -> inductor_ir.CompiledGraph:
    example = _inputs(n, c, hw, device)
    gm = make_fx(batch_norm_backward)(*example)
    compiled = inductor_ir.compile_graph(gm, list(example), backends={device: backend})
    # Several calls: on CUDA the later ones take the direct launch path (split reductions reuse
    # their workspaces), which must give the same results as the first.
    for _ in range(3):
        fresh = _inputs(n, c, hw, device)
        for got, expected in zip(compiled(*fresh), batch_norm_backward(*fresh)):
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    return compiled


def test_batch_norm_backward_is_at_most_two_reduction_kernels(cpu_backend: TritonBackend) -> None:
    compiled = _check(cpu_backend, "cpu", 4, 6, 10)
    assert len(compiled.sources) <= 2, [s.name for s in compiled.sources]
    assert all(s.group.reduction_size for s in compiled.sources)


def test_split_reduction_stores_pointwise_terms_in_its_first_kernel(cpu_backend: TritonBackend) -> None:
    # 2 x 4096 elements per channel for 3 channels: long enough to split across programs.
    compiled = _check(cpu_backend, "cpu", 2, 3, 4096)
    split = [s for s in compiled.sources if s.name.endswith("_split")]
    assert split, [s.name for s in compiled.sources]
    stored_in_loop = [
        node.name for s in split for node in s.group.nodes if node.kind == "pointwise" and node.in_reduction_loop
    ]
    outputs = {r.name for s in split for r in s.group.outputs}
    assert set(stored_in_loop) & outputs, (stored_in_loop, outputs)


@pytest.mark.gpu
def test_batch_norm_backward_on_gpu(gpu_backend: TritonBackend) -> None:
    compiled = _check(gpu_backend, "cuda", 16, 64, 4096)
    assert len(compiled.sources) <= 2
    assert any(s.name.endswith("_split") for s in compiled.sources)
