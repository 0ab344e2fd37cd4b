"""Test setup: Triton's interpreter for the CPU tier, a private cache folder, shared fixtures; the IR of every
graph the tests compile is checked (`InductorIRConfig.check_ir`).

The interpreter must be chosen before triton is first imported (its library functions are decorated
at import), so this sets `TRITON_INTERPRET=1` on machines without CUDA when it is not set already.
On a CUDA machine the CPU-interpreter tests are skipped unless TRITON_INTERPRET=1 was set by the caller,
and the `gpu` tests compile real kernels.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest

import inductor_ir
from codegen_triton import TritonBackend, TritonConfig
from codegen_triton.config import interpreter_ready


@pytest.fixture(scope="session")
def kiln_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache folder private to this test session."""
    return tmp_path_factory.mktemp("kiln_cache")


@pytest.fixture
def cpu_backend(kiln_cache: Path) -> Iterator[TritonBackend]:
    """`TritonBackend(device_type="cpu")`: every kernel runs in Triton's interpreter on CPU tensors."""
    if not interpreter_ready():
        pytest.skip("triton was imported without TRITON_INTERPRET=1: the interpreter tier cannot run here")
    torch.manual_seed(0)
    yield TritonBackend(device_type="cpu", config=TritonConfig(cache_dir=kiln_cache))


@pytest.fixture
def gpu_backend(kiln_cache: Path) -> TritonBackend:
    """`TritonBackend()` for CUDA, compiling real kernels (tests using it are marked `gpu`)."""
    if interpreter_ready():
        pytest.skip("TRITON_INTERPRET=1 is set: real CUDA kernels cannot be compiled in this process")
    return TritonBackend(config=TritonConfig(cache_dir=kiln_cache))


@pytest.fixture(autouse=True)
def _check_ir() -> Iterator[None]:
    """`compile_graph` without a config checks the IR after lowering and scheduling (`InductorIRConfig.check_ir`)."""
    with inductor_ir.InductorIRConfig.patch_defaults(check_ir=True):
        yield
