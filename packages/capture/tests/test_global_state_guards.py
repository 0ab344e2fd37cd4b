"""Values read from global state at trace time are guarded: flags queried through torch functions
(`torch.are_deterministic_algorithms_enabled()`), flags kept as module attributes
(`torch.backends.cudnn.enabled`), and everything in the user's own modules (a config module's number,
a function replaced later). Each change recompiles and gives eager's result."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest
import torch
from capture_helpers import RecordingBackend

import capture


@pytest.fixture
def config_module() -> Iterator[types.ModuleType]:
    module = types.ModuleType("kiln_test_config")
    module.scale = 2.0  # type: ignore[attr-defined]
    module.activation = torch.sin  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def _x() -> torch.Tensor:
    return torch.randn(5, generator=torch.Generator().manual_seed(0))


def test_deterministic_algorithms_flag_and_thread_count() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        factor = 2 if torch.are_deterministic_algorithms_enabled() else 3
        return x * factor + torch.get_num_threads()

    backend = RecordingBackend()
    compiled = capture.optimize(backend)(f)
    x = _x()
    threads = torch.get_num_threads()
    try:
        torch.testing.assert_close(compiled(x), f(x))
        torch.use_deterministic_algorithms(True)
        torch.testing.assert_close(compiled(x), f(x))
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(1 if threads != 1 else 2)
        torch.testing.assert_close(compiled(x), f(x))
    finally:
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(threads)
    assert backend.count == 3
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 3  # the first state again: its entry is reused


def test_flags_kept_as_module_attributes() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * (1.0 if torch.backends.cudnn.enabled else 5.0)

    compiled = capture.optimize(RecordingBackend())(f)
    x = _x()
    torch.testing.assert_close(compiled(x), f(x))
    # The flags() context manager: torch's own test utilities forbid setting the flag directly.
    with torch.backends.cudnn.flags(enabled=not torch.backends.cudnn.enabled):
        torch.testing.assert_close(compiled(x), f(x))
    torch.testing.assert_close(compiled(x), f(x))


def test_attributes_of_user_modules(config_module: types.ModuleType) -> None:
    import kiln_test_config as config  # type: ignore[import-not-found]

    def f(x: torch.Tensor) -> torch.Tensor:
        return config.activation(x) * config.scale

    backend = RecordingBackend()
    compiled = capture.optimize(backend)(f)
    x = _x()
    torch.testing.assert_close(compiled(x), f(x))
    config_module.scale = 7.0  # type: ignore[attr-defined]
    torch.testing.assert_close(compiled(x), f(x))
    config_module.activation = torch.cos  # type: ignore[attr-defined]
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 3


def test_library_functions_need_no_guards() -> None:
    """torch's and math's functions, classes and dtypes are read without guards of their own."""
    import math

    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.relu(x).to(torch.float64) * math.pi

    checks = " ".join(g.code for g in capture.explain(f, _x()).guards)
    assert "relu" not in checks and "float64" not in checks and ".pi" not in checks
