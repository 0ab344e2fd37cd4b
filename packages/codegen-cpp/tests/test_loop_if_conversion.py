"""A select between a scattered value and a load through a computed index matches eager.

g++ 12 -O3 with AVX if-converts and vectorizes such a loop into wrong code (reflect padding of a
scatter read zeros and garbage), so kernels build with -fno-tree-loop-if-convert where the compiler
accepts it.
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend
from codegen_cpp.compile.toolchain import GCC_WORKAROUND_FLAGS


def _scatter_then_reflect(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    t = torch.scatter(x, -1, index, 3.25)
    # F.pad(t, (1, 1), mode="reflect") as aotgrad decomposes it: a gather through |2 - |i - 1||.
    n = x.shape[-1]
    reflect = (n - 1) - ((n - 1) - torch.arange(-1, n + 1).abs()).abs()
    return torch.ops.aten._unsafe_index.Tensor(t, [None, reflect])


@pytest.mark.parametrize("rows", (1, 4, 9))
def test_scatter_then_reflect_pad_matches_eager(backend: CppBackend, rows: int) -> None:
    generator = torch.Generator().manual_seed(41)
    x = torch.randn(rows, 3, generator=generator)
    index = torch.randperm(3, generator=generator)[None]
    compiled = inductor_ir.compile_graph(make_fx(_scatter_then_reflect)(x, index), [x, index], backends={"cpu": backend})
    got = compiled(x, index)
    torch.testing.assert_close(got, _scatter_then_reflect(x, index), rtol=0, atol=0)


def test_gcc_builds_without_loop_if_conversion(backend: CppBackend) -> None:
    toolchain = backend.toolchain()
    if "g++" not in toolchain.compiler and "gcc" not in toolchain.version.lower():
        pytest.skip("a compiler other than g++")
    assert set(GCC_WORKAROUND_FLAGS) <= set(toolchain.flags)
