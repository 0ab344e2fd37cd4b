"""Shared fixtures of the frontend tests."""

from __future__ import annotations

import pytest

import frontend


@pytest.fixture
def fresh_cache() -> None:
    """Forget compiled code (capture's cache) and compile times between tests."""
    frontend.reset()
