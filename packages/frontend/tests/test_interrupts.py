"""Ctrl-C during a process's first compile reaches the user as KeyboardInterrupt, and the next
compile works: nothing half-initialized is left behind to make later graphs run eagerly.

Each test injects the interrupt where the first compile is exposed to it: a compiler child killed
by the terminal's SIGINT (the toolchain probe is remembered for the process and on disk; a build
failure would turn the graph eager), the kernel backend's entry point being imported, the backends
registry reading its plugins, and the first run of a compiled graph.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
from codegen_cpp import CppConfig, find_toolchain
from frontend import stage_options
from frontend.backends import registry
from frontend.backends.fallback import compile_or_fall_back
from frontend.config import Config
from frontend.context import CompileContext

STRICT = {"fallback_to_eager": False}


def _fn(x: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) * 1.25 - x


def _compile_and_check(fn: Callable[[torch.Tensor], torch.Tensor] = _fn) -> None:
    """A fresh compile that must build kernels (a fallback raises) and match eager."""
    frontend.reset()
    compiled = frontend.compile(fn, options=STRICT, fullgraph=True)
    x = torch.randn(21, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(compiled(x), fn(x), rtol=1e-5, atol=1e-6)


def _killed_once(real: Callable[..., Any], when: Callable[[list[str]], bool]) -> Callable[..., Any]:
    """``subprocess.run`` whose first matching command dies of SIGINT, as under Ctrl-C in a terminal."""
    fired: list[bool] = []

    def run(command: list[str], *args: Any, **kwargs: Any) -> Any:
        if not fired and when(command):
            fired.append(True)
            return subprocess.CompletedProcess(command, -signal.SIGINT, "", "")
        return real(command, *args, **kwargs)

    return run


def test_ctrl_c_during_the_compiler_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = find_toolchain(CppConfig(cache_dir=tmp_path / "reference"))
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))  # a cache this process never probed
    monkeypatch.setattr(frontend.config, "cache_dir", tmp_path / "cache")  # (the frontend reads it at import)
    monkeypatch.setattr(subprocess, "run", _killed_once(subprocess.run, lambda c: any("probe" in str(a) for a in c)))
    frontend.reset()
    with pytest.raises(KeyboardInterrupt):
        frontend.compile(_fn, options=STRICT, fullgraph=True)(torch.randn(4))
    _compile_and_check()
    # The interrupted probe was not taken for a refused flag (remembered on disk for every process).
    assert find_toolchain(CppConfig.from_env()).flags == expected.flags


def test_ctrl_c_while_the_kernel_library_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frontend.config, "cache_dir", tmp_path)
    built = _killed_once(subprocess.run, lambda c: any("kernels" in str(a) for a in c))
    monkeypatch.setattr(subprocess, "run", built)
    frontend.reset()
    with pytest.raises(KeyboardInterrupt):
        frontend.compile(_fn, options=STRICT, fullgraph=True)(torch.randn(4))
    _compile_and_check()


def test_ctrl_c_while_the_kernel_backend_is_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    real = stage_options.kernel_backend_entries

    class Interrupted:
        """An entry point whose import is interrupted, once."""

        def __init__(self, point: Any) -> None:
            self.point, self.value = point, point.value

        def load(self) -> Any:
            monkeypatch.setattr(stage_options, "kernel_backend_entries", real)
            raise KeyboardInterrupt

    monkeypatch.setattr(
        stage_options, "kernel_backend_entries", lambda: {k: Interrupted(v) for k, v in real().items()}
    )
    frontend.reset()
    with pytest.raises(KeyboardInterrupt):
        frontend.compile(_fn, options=STRICT, fullgraph=True)(torch.randn(4))
    _compile_and_check()


def test_ctrl_c_while_backend_plugins_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    class Point:
        name, value = "plugin_backend", "plugin_module:compiler"

    calls: list[str] = []

    def entry_points(group: str) -> list[Point]:
        calls.append(group)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return [Point()]

    monkeypatch.setattr(registry, "entry_points", entry_points)
    backends = registry.BackendRegistry()
    with pytest.raises(KeyboardInterrupt):
        backends.names()
    assert "plugin_backend" in backends.names()


def test_interrupted_first_run_keeps_the_eager_fallback_armed() -> None:
    gm = torch.fx.symbolic_trace(lambda x: x * 2)
    runs: list[int] = []

    def compiled(x: torch.Tensor) -> torch.Tensor:
        runs.append(1)
        if len(runs) == 1:
            raise KeyboardInterrupt
        raise RuntimeError("a kernel that fails on its first complete run")

    context = CompileContext.for_config(Config(), "user_fn")
    guarded = compile_or_fall_back(lambda: compiled, gm, context, "the forward graph")
    x = torch.randn(5)
    with pytest.raises(KeyboardInterrupt):
        guarded(x)
    torch.testing.assert_close(guarded(x), x * 2)  # the failure of the real first run falls back
