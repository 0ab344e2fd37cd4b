"""The binary index: a warm process loads a kernel's compiled variants without executing its module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend
from codegen_triton.runtime import binaries as binaries_module
from codegen_triton.runtime import launcher as launcher_module
from codegen_triton.runtime.autotune import LaunchConfig
from codegen_triton.runtime.binaries import BinaryIndex, kernel_parameters
from codegen_triton.runtime.fast_launch import Variant, make_variant
from codegen_triton.runtime.launcher import KernelSpec, TritonLauncher

_SOURCE = '''
import triton
import triton.language as tl


@triton.jit
def kernel(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    xmask = xindex < xnumel
    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex, xmask) * 2, xmask)
'''
_HASH = "0123456789abcdef" * 4
_VARIANT = Variant(("*fp32", "*fp32", "i32"), (0, 1), (1024,), 4, 1)


class _Compiled:
    """What a `CompiledKernel` is built from (Triton's is replaced: no GPU binary exists here)."""

    def __init__(self, src: Any, group: dict[str, str], triton_hash: str) -> None:
        self.src, self.group, self.hash = src, group, triton_hash


@pytest.fixture
def triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Triton's cache folder for one test, holding the cache group of `_HASH`'s kernel; Triton's
    `CompiledKernel` replaced by `_Compiled`."""
    import triton.compiler.compiler as compiler
    from triton.runtime.cache import get_cache_manager

    folder = tmp_path / "triton_cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    monkeypatch.setattr(compiler, "CompiledKernel", _Compiled)
    manager = get_cache_manager(_HASH)
    binary = manager.put(b"binary", "kernel.cubin", binary=True)
    metadata = manager.put('{"name": "kernel"}', "kernel.json")
    manager.put_group("kernel.json", {"kernel.json": metadata, "kernel.cubin": binary})
    return folder


def test_a_recorded_variant_loads_from_tritons_cache_group(tmp_path: Path, triton_cache: Path) -> None:
    index = BinaryIndex(tmp_path / "kiln", _SOURCE, "kernel", "Test GPU")
    assert not index.contains(_VARIANT) and index.load(_VARIANT, ("in_ptr0", "out_ptr0", "xnumel", "XBLOCK")) is None
    index.record(_VARIANT, _Compiled(None, {}, _HASH))
    assert index.contains(_VARIANT)
    loaded = BinaryIndex(tmp_path / "kiln", _SOURCE, "kernel", "Test GPU").load(
        _VARIANT, ("in_ptr0", "out_ptr0", "xnumel", "XBLOCK")
    )
    assert isinstance(loaded, _Compiled) and loaded.hash == _HASH
    assert set(loaded.group) == {"kernel.json", "kernel.cubin"}
    # The source Triton's launcher is built from: the variant's signature, its block as a constant.
    assert loaded.src.name == "kernel" and loaded.src.fn.arg_names == ["in_ptr0", "out_ptr0", "xnumel", "XBLOCK"]
    assert loaded.src.signature == {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "XBLOCK": "constexpr"}
    assert loaded.src.constants == {(3,): 1024}


def test_the_key_covers_source_variant_gpu_and_tritons_environment(
    tmp_path: Path, triton_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = BinaryIndex(tmp_path, _SOURCE, "kernel", "Test GPU")
    key = index.key(_VARIANT)
    assert BinaryIndex(tmp_path, _SOURCE + "\n", "kernel", "Test GPU").key(_VARIANT) != key
    assert BinaryIndex(tmp_path, _SOURCE, "kernel", "Another GPU").key(_VARIANT) != key
    assert index.key(Variant(("*fp32", "*fp32", "i32"), (0, 1), (1024,), 8, 1)) != key
    assert index.key(Variant(("*fp32", "*fp32", "i32"), (0,), (1024,), 4, 1)) != key
    monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")  # one of the variables Triton's own key includes
    assert index.key(_VARIANT) != key


@pytest.mark.parametrize("fault", ["garbage", "another key", "bad hash", "no group", "unreadable"])
def test_a_broken_record_or_a_missing_group_loads_nothing(tmp_path: Path, triton_cache: Path, fault: str) -> None:
    index = BinaryIndex(tmp_path, _SOURCE, "kernel", "Test GPU")
    index.record(_VARIANT, _Compiled(None, {}, _HASH if fault != "no group" else "f" * 64))
    path = tmp_path / "triton" / "compiled" / index.key(_VARIANT)
    if fault == "garbage":
        path.write_bytes(b"\x00\xff{")
    elif fault == "another key":
        path.write_text(path.read_text().replace(index.key(_VARIANT), "0" * 64))
    elif fault == "bad hash":
        path.write_text(path.read_text().replace(_HASH, "../../etc"))
    elif fault == "unreadable":
        path.unlink()
        path.mkdir()
    assert index.load(_VARIANT, ("in_ptr0", "out_ptr0", "xnumel", "XBLOCK")) is None


class _FastKernel:
    def __init__(self, compiled: Any, variant: Variant) -> None:
        self.compiled, self.variant = compiled, variant


def test_a_warm_launch_loads_from_the_index_without_executing_the_kernels_module(
    tmp_path: Path, triton_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher_module, "_device_name", lambda device: "Test GPU")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(launcher_module, "FastKernel", _FastKernel)
    compiled_by_triton: list[Variant] = []

    def compile_variant(fn: Any, variant: Variant, target: Any) -> _Compiled:
        compiled_by_triton.append(variant)
        return _Compiled(None, {}, _HASH)

    monkeypatch.setattr(launcher_module, "compile_variant", compile_variant)
    spec = KernelSpec("kernel", _SOURCE, "pointwise", ("in_ptr0", "out_ptr0", "xnumel"))
    config = LaunchConfig({"XBLOCK": 1024}, 4)
    args = [torch.float32, torch.float32, 100_000]
    cold = TritonLauncher(spec, tmp_path)
    cold._target = object()
    assert isinstance(cold._fast_kernel(args, config), _FastKernel)
    assert compiled_by_triton == [make_variant(args, (1024,), 4, 1)]  # compiled, then recorded
    warm = TritonLauncher(spec, tmp_path)
    fast = warm._fast_kernel(args, config)
    assert isinstance(fast, _FastKernel) and isinstance(fast.compiled, _Compiled) and fast.compiled.hash == _HASH
    assert len(compiled_by_triton) == 1
    assert "module" not in vars(warm)  # the kernel's module never ran


def _chain(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    h = torch.relu(x @ w)
    return torch.softmax(h, -1), (h * 3).sum(0)


def test_parameters_read_from_generated_source_match_tritons(cpu_backend: TritonBackend) -> None:
    x, w = torch.randn(40, 16), torch.randn(16, 70)
    gm = make_fx(_chain)(x, w)
    compiled = inductor_ir.compile_graph(gm, [x, w], backends={"cpu": cpu_backend})
    cpu_backend.compile(compiled.sources)
    launchers = [call.launcher for call in cpu_backend._calls.values()]
    assert len(launchers) >= 2
    for launcher in launchers:
        assert launcher.parameters == tuple(launcher.fn.arg_names)
    assert kernel_parameters(_SOURCE, "kernel") == ("in_ptr0", "out_ptr0", "xnumel", "XBLOCK")
    assert binaries_module.KernelNames("k", ["a"]).__name__ == "k"
