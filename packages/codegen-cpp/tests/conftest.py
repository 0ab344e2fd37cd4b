"""Shared fixtures: one temporary kernel cache per test session, so every run compiles honestly; the IR of
every graph the tests compile is checked (`InductorIRConfig.check_ir`)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import inductor_ir
from codegen_cpp import CppBackend, CppConfig

# Test modules import the helpers in cpp_test_groups.py (pytest runs with --import-mode=importlib).
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh KILN_CACHE_DIR for the session (set in the environment too, for compile_graph)."""
    root = tmp_path_factory.mktemp("kiln-cache")
    previous = os.environ.get("KILN_CACHE_DIR")
    os.environ["KILN_CACHE_DIR"] = str(root)
    yield root / "cpp"
    if previous is None:
        os.environ.pop("KILN_CACHE_DIR", None)
    else:
        os.environ["KILN_CACHE_DIR"] = previous


@pytest.fixture(scope="session")
def backend(cache_dir: Path) -> CppBackend:
    """A C++ backend writing to the session's cache."""
    return CppBackend(CppConfig(cache_dir=cache_dir))


@pytest.fixture(autouse=True)
def _check_ir() -> Iterator[None]:
    """`compile_graph` without a config checks the IR after lowering and scheduling (`InductorIRConfig.check_ir`)."""
    with inductor_ir.InductorIRConfig.patch_defaults(check_ir=True):
        yield
