"""Pythons capture cannot rewrite bytecode for: functions run as written, never a crash."""

from __future__ import annotations

import pytest
import torch
from capture_helpers import RecordingBackend

import capture
import capture.cache


def test_an_unsupported_python_runs_everything_eagerly(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a Python whose bytecode capture cannot rewrite, functions run as written, with one warning."""
    monkeypatch.setattr(capture.cache, "python_supported", lambda: False)
    capture.cache.warn_unsupported_python.cache_clear()
    backend = RecordingBackend()
    compiled = capture.optimize(backend)(lambda x: x.sin() + 1)
    x = torch.randn(4, generator=torch.Generator().manual_seed(0))
    with pytest.warns(RuntimeWarning, match="compiled functions run eagerly"):
        torch.testing.assert_close(compiled(x), x.sin() + 1)
    torch.testing.assert_close(compiled(x * 2), (x * 2).sin() + 1)
    assert backend.count == 0
    with pytest.raises(capture.InternalCaptureError, match="capture supports Python"):
        capture.optimize(RecordingBackend(), nopython=True)(lambda x: x.cos())(x)
    capture.cache.warn_unsupported_python.cache_clear()
