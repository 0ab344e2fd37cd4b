"""Shared fixtures of the frontend tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import frontend
import frontend.graph_cache.lookup as lookup
import frontend.graph_cache.store as store


@pytest.fixture
def fresh_cache() -> None:
    """Forget compiled code (capture's cache) and compile times between tests."""
    frontend.reset()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache folder for this test, graph cache on, faults not yet reported."""
    monkeypatch.setattr(store, "_REPORTED", set())
    monkeypatch.setattr(lookup, "_STORES", {})
    frontend.reset()
    with frontend.config.patch(cache_dir=tmp_path, graph_cache=True):
        yield tmp_path
    frontend.reset()
