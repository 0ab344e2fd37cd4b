"""The compile machinery: on-disk cache hits, corrupted entries rebuilt, compiler errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import sympy
import torch
from cpp_test_groups import flat, pointwise_group

from codegen_cpp import CppBackend, CppCompileError, CppCompilerNotFoundError, CppConfig
from codegen_cpp.compile.cache import KernelCache
from inductor_ir import KernelGroup, ops

S0 = sympy.Symbol("s0", integer=True, positive=True)


def _affine_group(scale: float) -> KernelGroup:
    """out = x * scale + 1 over a dynamic size s0."""

    def body(x: sympy.Symbol) -> None:
        value = ops.mul(ops.load("x", x), ops.constant(scale, torch.float32))
        ops.store("out", x, ops.add(value, ops.constant(1.0, torch.float32)))

    return pointwise_group(
        f"affine_{str(scale).replace('.', '_')}",
        body,
        [flat("x", torch.float32, S0)],
        [flat("out", torch.float32, S0)],
        S0,
        [S0],
    )


def _run(backend: CppBackend, group: KernelGroup, n: int = 1000) -> None:
    (kernel,) = backend.compile([backend.generate(group)])
    x = torch.randn(n)
    out = torch.empty_like(x)
    kernel(x, out, n)
    scale = float(group.name.split("_", 1)[1].replace("_", "."))
    torch.testing.assert_close(out, x * scale + 1.0)


def test_second_compile_is_a_cache_hit_in_a_fresh_backend(tmp_path: Path) -> None:
    first = CppBackend(CppConfig(cache_dir=tmp_path))
    _run(first, _affine_group(2.5))
    assert (first.stats.libraries, first.stats.cache_hits) == (1, 0)
    second = CppBackend(CppConfig(cache_dir=tmp_path))
    _run(second, _affine_group(2.5))
    assert (second.stats.libraries, second.stats.cache_hits) == (1, 1)
    assert second.stats.compiler_seconds == 0.0
    assert "1 cached" in second.stats.summary()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "delete_checksum"])
def test_corrupted_cache_entry_is_rebuilt(tmp_path: Path, damage: str) -> None:
    first = CppBackend(CppConfig(cache_dir=tmp_path))
    _run(first, _affine_group(0.5))
    library = first.last_library
    assert library is not None and library.exists()
    # Damage a new file at the library's path (this process still maps the old one: writing into
    # that inode would pull pages out from under the loaded code).
    if damage == "truncate":
        data = library.read_bytes()[:100]
        library.unlink()
        library.write_bytes(data)
    elif damage == "garbage":
        library.unlink()
        library.write_bytes(b"\x7fELF not really a library" * 10)
    else:
        library.with_name("kernels.so.sha256").unlink()
    second = CppBackend(CppConfig(cache_dir=tmp_path))
    _run(second, _affine_group(0.5))
    assert second.stats.cache_hits == 0  # rebuilt, and the rebuilt library works
    assert (
        KernelCache(tmp_path)
        .entry(library.parent.joinpath("kernels.cpp").read_text(), second.toolchain().fingerprint())
        .is_valid()
    )


def test_missing_compiler_is_one_clear_error(tmp_path: Path) -> None:
    backend = CppBackend(CppConfig(compiler="/nonexistent/kiln-test-g++", cache_dir=tmp_path))
    with pytest.raises(CppCompilerNotFoundError) as info:
        backend.compile([backend.generate(_affine_group(3.0))])
    message = str(info.value)
    assert "needs a C++ compiler" in message and "apt install g++" in message
    assert "CXX" in message and "fallback_to_eager=True" in message


def test_missing_compiler_falls_back_to_eager_when_asked(tmp_path: Path) -> None:
    config = CppConfig(compiler="/nonexistent/kiln-test-g++", cache_dir=tmp_path, fallback_to_eager=True)
    backend = CppBackend(config)
    _run(backend, _affine_group(3.0), n=37)


def test_compiler_error_names_the_source_file_and_message(tmp_path: Path, backend: CppBackend) -> None:
    source = backend.generate(_affine_group(4.0))
    broken = dataclasses.replace(source, source=source.source.replace("kiln::load", "kiln::no_such_load"))
    fresh = CppBackend(CppConfig(cache_dir=tmp_path))
    with pytest.raises(CppCompileError) as info:
        fresh.compile([broken])
    assert info.value.source_path.exists()
    assert str(info.value.source_path) in str(info.value)
    assert "no_such_load" in str(info.value)
    assert any(source.name in note for note in info.value.__notes__)  # which kernels, from which ops


def test_big_graph_compiles_in_parallel_parts_into_one_library(tmp_path: Path) -> None:
    backend = CppBackend(CppConfig(cache_dir=tmp_path, kernels_per_part=1, compile_workers=2))
    groups = [_affine_group(1.5), _affine_group(-2.0)]
    kernels = backend.compile([backend.generate(g) for g in groups])
    library = backend.last_library
    assert library is not None
    assert sorted(p.name for p in library.parent.glob("kernels_part*.cpp")) == [
        "kernels_part0.cpp",
        "kernels_part1.cpp",
    ]
    x = torch.randn(100)
    for kernel, scale in zip(kernels, (1.5, -2.0)):
        out = torch.empty_like(x)
        kernel(x, out, 100)
        torch.testing.assert_close(out, x * scale + 1.0)


def test_thread_count_is_passed_on_every_call(tmp_path: Path) -> None:
    backend = CppBackend(CppConfig(cache_dir=tmp_path, num_threads=1, parallel_threshold=1))
    source = backend.generate(_affine_group(0.25))
    assert "num_threads(kiln_threads)" in source.source
    (kernel,) = backend.compile([source])
    x = torch.randn(5000)
    out = torch.empty_like(x)
    kernel(x, out, 5000)
    torch.testing.assert_close(out, x * 0.25 + 1.0)
