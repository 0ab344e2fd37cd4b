"""Pointwise kernels over channels-last buffers iterate with the channel dim innermost (contiguous)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend


def _channels_last(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(memory_format=torch.channels_last)


def _compile(fn: object, example: torch.Tensor, backend: TritonBackend) -> inductor_ir.CompiledGraph:
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(example)
    return inductor_ir.compile_graph(gm, [example], backends={"cpu": backend})


def test_channels_last_pointwise_walks_channels_contiguously(cpu_backend: TritonBackend) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2 + 1)

    compiled = _compile(fn, _channels_last(2, 6, 5, 7), cpu_backend)
    (source,) = compiled.sources
    assert source.name.startswith("triton_poi") and "YBLOCK" not in source.source
    assert "in_ptr0 + (xindex)" in source.source, source.source  # one flat, contiguous walk
    fresh = _channels_last(2, 6, 5, 7)
    out = compiled(fresh)
    torch.testing.assert_close(out, fn(fresh))


def test_channels_last_windows_walk_channels_contiguously(cpu_backend: TritonBackend) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        # Shifted windows of one channels-last map (a pooling-like stencil); the result is channels-last too.
        return torch.maximum(x[:, :, 1:, 1:], x[:, :, :-1, :-1]) * 3

    compiled = _compile(fn, _channels_last(2, 8, 9, 9), cpu_backend)
    fresh = _channels_last(2, 8, 9, 9)
    torch.testing.assert_close(compiled(fresh), fn(fresh))
    (source,) = compiled.sources
    assert "YBLOCK" not in source.source, source.source


def test_max_pool_from_channels_last_to_contiguous_matches_eager(cpu_backend: TritonBackend) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 3, 2, 1)

    compiled = _compile(fn, _channels_last(2, 8, 9, 9), cpu_backend)
    fresh = _channels_last(2, 8, 9, 9)
    torch.testing.assert_close(compiled(fresh), fn(fresh))
