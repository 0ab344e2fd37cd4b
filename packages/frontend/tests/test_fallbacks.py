"""Graphs a kernel backend cannot take run eagerly, with the reason logged, or raise when asked."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
import torch

import frontend
from frontend.backends.fallback import compile_or_fall_back, graph_device_types, mixed_devices_reason
from frontend.backends.kernel_backends import (
    KernelBackendUnavailable,
    build_kernel_backend,
    load_kernel_backend,
)
from frontend.backends.registry import lookup_backend
from frontend.config import Config
from frontend.context import CompileContext


class _TwoDevices(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.randn(4, device="meta"))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + 1, self.offset * 2


@dataclass(frozen=True)
class FakeConfig:
    max_configs: int = 4
    fallback_random: bool = False


class WithOptions:
    """A configurable kernel backend: it parses its own options (and turns max_autotune into its own setting)."""

    device_type = "cuda"

    def __init__(self, config: FakeConfig | None = None) -> None:
        self.config = config

    @classmethod
    def parse_options(cls, options: dict[str, Any]) -> FakeConfig:
        own = dict(options)
        max_configs = 16 if own.pop("max_autotune") else 4
        assert set(own) == {"fallback_random", "runtime_checks", "cache_root"}, own
        return FakeConfig(max_configs=max_configs, fallback_random=own["fallback_random"])


class WithoutOptions:
    device_type = "cpu"


def _context(**options: Any) -> CompileContext:
    return CompileContext.for_config(Config().with_options(options), "user_fn")


def test_device_types_count_cpu_scalars() -> None:
    gm = torch.fx.symbolic_trace(lambda x, y: x * y)
    assert graph_device_types(gm, [torch.randn(3), torch.tensor(2.0)]) == {"cpu"}
    assert graph_device_types(gm, [torch.randn(3, device="meta"), torch.tensor(2.0)]) == {"cpu", "meta"}
    assert graph_device_types(_traced_two_devices(), [torch.randn(4)]) == {"cpu", "meta"}
    reason = mixed_devices_reason(gm, [torch.randn(3, device="meta"), torch.tensor(2.0)], {"cpu", "meta"})
    assert "CPU scalar tensors" in reason


def _traced_two_devices() -> torch.fx.GraphModule:
    return torch.fx.symbolic_trace(_TwoDevices())


def test_mixed_devices_fall_back_with_logged_reason(caplog: pytest.LogCaptureFixture) -> None:
    gm = _traced_two_devices()
    x = torch.randn(4)
    with caplog.at_level(logging.DEBUG, logger="kiln.fallbacks"):
        compiled = lookup_backend("inductor")(gm, [x], _context())
    on_cpu, on_meta = compiled(x)
    assert torch.equal(on_cpu, x + 1) and on_meta.device.type == "meta"
    assert "mixes devices ['cpu', 'meta']" in caplog.text and "user_fn" in caplog.text


def test_mixed_devices_raise_when_fallback_is_off() -> None:
    with pytest.raises(frontend.BackendCompileError, match="fallback_to_eager=False"):
        lookup_backend("inductor")(_traced_two_devices(), [torch.randn(4)], _context(fallback_to_eager=False))


def test_device_without_kernel_backend_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    gm = torch.fx.symbolic_trace(lambda x: torch.sin(x) + 1)
    x = torch.randn(8, device="meta")
    with caplog.at_level(logging.DEBUG, logger="kiln.fallbacks"):
        compiled = lookup_backend("inductor")(gm, [x], _context())
    assert compiled(x).shape == (8,)
    assert "no kernel backend is installed for device 'meta'" in caplog.text
    with pytest.raises(KernelBackendUnavailable, match=r"kiln\.kernel_backends"):
        load_kernel_backend("meta", Config())


def test_compile_failure_and_first_run_failure_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    gm = torch.fx.symbolic_trace(lambda x: x * 3)
    x = torch.randn(5)

    def broken_compile() -> Any:
        raise RuntimeError("no C++ compiler found")

    with caplog.at_level(logging.DEBUG, logger="kiln.fallbacks"):
        runner = compile_or_fall_back(broken_compile, gm, _context(), "the forward graph")
    assert torch.equal(runner(x), x * 3)
    assert "no C++ compiler found" in caplog.text

    def crashes_on_first_run(*args: Any) -> Any:
        raise RuntimeError("kernel launch failed")

    runner = compile_or_fall_back(lambda: crashes_on_first_run, gm, _context(), "the forward graph")
    assert torch.equal(runner(x), x * 3)
    assert torch.equal(runner(x + 1), (x + 1) * 3)
    with pytest.raises(frontend.BackendCompileError, match="no C\\+\\+ compiler"):
        compile_or_fall_back(broken_compile, gm, _context(fallback_to_eager=False), "the forward graph")


def test_kernel_backend_parses_its_own_options() -> None:
    tuned = Config().with_options({"max_autotune": True, "fallback_random": True})
    made = build_kernel_backend(WithOptions, tuned, "cuda")
    assert made.config == FakeConfig(max_configs=16, fallback_random=True)
    assert isinstance(build_kernel_backend(WithoutOptions, tuned), WithoutOptions)
    ready = WithoutOptions()
    assert build_kernel_backend(ready, tuned) is ready


def test_installed_kernel_backends_are_found_by_entry_point() -> None:
    from frontend.backends.kernel_backends import kernel_backend_entries

    entries = kernel_backend_entries()
    assert entries["cpu"].value == "codegen_cpp:CppBackend"
    cpu = load_kernel_backend("cpu", Config())
    assert cpu.device_type == "cpu"
    assert hasattr(cpu, "generate") and hasattr(cpu, "compile")


def test_a_write_only_eager_defines_runs_eagerly_as_a_reported_fallback(caplog: pytest.LogCaptureFixture) -> None:
    """An in-place add into an input whose elements overlap (fuzz 9327aff3a2): aotgrad runs the
    graph eagerly whatever fallback_to_eager says; the frontend reports it as a fallback."""

    def add_into(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.add_(b, alpha=-2)

    def inputs() -> list[torch.Tensor]:
        base = torch.arange(3, dtype=torch.int32)
        return [base.as_strided((2, 2), (1, 1)), torch.tensor([[4]], dtype=torch.int32)]

    compiled = frontend.compile(add_into, options={"fallback_to_eager": False})
    with caplog.at_level(logging.DEBUG, logger="kiln.fallbacks"):
        got = compiled(*inputs())
    assert torch.equal(got, add_into(*inputs()))
    assert "runs eagerly" in caplog.text or "running this graph eagerly" in caplog.text
    assert any(record.name == "kiln.fallbacks" for record in caplog.records)
