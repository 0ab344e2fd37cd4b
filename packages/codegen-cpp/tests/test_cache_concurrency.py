"""Concurrent builders of one cache entry: each renames its own files into place, every one of them
loads a valid library, and no temporary file is left behind."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sympy
import torch
from cpp_test_groups import flat, pointwise_group

from codegen_cpp import CppBackend, CppConfig
from codegen_cpp.compile.cache import KernelCache
from inductor_ir import KernelGroup, ops

S0 = sympy.Symbol("s0", integer=True, positive=True)


def _cube_group() -> KernelGroup:
    def body(x: sympy.Symbol) -> None:
        value = ops.load("x", x)
        ops.store("out", x, ops.mul(ops.mul(value, value), value))

    return pointwise_group("cube", body, [flat("x", torch.float32, S0)], [flat("out", torch.float32, S0)], S0, [S0])


def test_concurrent_builds_of_one_entry(tmp_path: Path) -> None:
    def build(_: int) -> torch.Tensor:
        backend = CppBackend(CppConfig(cache_dir=tmp_path))
        (kernel,) = backend.compile([backend.generate(_cube_group())])
        x = torch.randn(100, generator=torch.Generator().manual_seed(5))
        out = torch.empty_like(x)
        kernel(x, out, 100)
        torch.testing.assert_close(out, x * x * x)
        return out

    with ThreadPoolExecutor(max_workers=3) as pool:
        list(pool.map(build, range(3)))
    (library,) = tmp_path.glob("*/*/kernels.so")
    assert not [p.name for p in library.parent.iterdir() if ".tmp-" in p.name]
    backend = CppBackend(CppConfig(cache_dir=tmp_path))
    source = library.parent.joinpath("kernels.cpp").read_text()
    assert KernelCache(tmp_path).entry(source, backend.toolchain().fingerprint()).is_valid()
