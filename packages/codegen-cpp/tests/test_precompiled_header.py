"""The precompiled runtime header: built once per cache folder, used by every build, never a failure."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import sympy
import torch
from cpp_test_groups import flat, pointwise_group

from codegen_cpp import CppBackend, CppConfig
from codegen_cpp.compile import pch
from inductor_ir import KernelGroup, ops

S0 = sympy.Symbol("s0", integer=True, positive=True)


def _group(name: str, scale: float) -> KernelGroup:
    def body(x: sympy.Symbol) -> None:
        value = ops.mul(ops.load("x", x), ops.constant(scale, torch.float32))
        ops.store("out", x, ops.add(ops.sin(value), ops.constant(1.0, torch.float32)))

    return pointwise_group(name, body, [flat("x", torch.float32, S0)], [flat("out", torch.float32, S0)], S0, [S0])


def _check(backend: CppBackend, name: str, scale: float) -> None:
    (kernel,) = backend.compile([backend.generate(_group(name, scale))])
    x = torch.randn(1031, generator=torch.Generator().manual_seed(7))
    out = torch.empty_like(x)
    kernel(x, out, x.numel())
    torch.testing.assert_close(out, torch.sin(x * scale) + 1.0)


def _pch_folders(cache: Path) -> list[Path]:
    return sorted((cache / "pch").glob("*"))


def _built(backend: CppBackend, cache: Path) -> Path:
    """The precompiled header's folder, once the background build the first library started ends."""
    folder = pch.precompiled_header_dir(backend.toolchain(), cache, wait=True)
    assert folder is not None
    return folder


def test_header_is_precompiled_once_and_used(tmp_path: Path) -> None:
    backend = CppBackend(CppConfig(cache_dir=tmp_path))
    _check(backend, "pch_first", 1.5)  # compiled from the plain header while the build runs
    folder = _built(backend, tmp_path)
    assert _pch_folders(tmp_path) == [folder]
    assert (folder / f"{pch.HEADER}.gch").stat().st_size > 0
    built = (folder / f"{pch.HEADER}.gch").stat().st_mtime_ns
    _check(CppBackend(CppConfig(cache_dir=tmp_path)), "pch_second", -0.5)  # with the header
    assert _pch_folders(tmp_path) == [folder]
    assert (folder / f"{pch.HEADER}.gch").stat().st_mtime_ns == built
    # The command really searches the precompiled header's folder first.
    toolchain = backend.toolchain().searching_first(folder)
    command = toolchain.command(Path("k.cpp"), Path("k.so"))
    assert command.index(f"-I{folder}") < min(i for i, f in enumerate(command) if f.startswith("-I") and f != f"-I{folder}")


def test_switched_off_builds_no_header(tmp_path: Path) -> None:
    _check(CppBackend(CppConfig(cache_dir=tmp_path, precompiled_header=False)), "pch_off", 2.0)
    assert _pch_folders(tmp_path) == []


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_header_never_fails_a_build(tmp_path: Path, damage: str) -> None:
    backend = CppBackend(CppConfig(cache_dir=tmp_path))
    _check(backend, "pch_before_damage", 0.25)
    folder = _built(backend, tmp_path)
    header = folder / f"{pch.HEADER}.gch"
    if damage == "truncate":
        header.write_bytes(header.read_bytes()[:1000])
    else:
        header.write_bytes(b"not a precompiled header")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a truncated header is reported once per process
        _check(CppBackend(CppConfig(cache_dir=tmp_path)), f"pch_after_{damage}", 3.0)
