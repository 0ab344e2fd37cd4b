"""Config: typed options, validation with the list of valid keys, scoped patch, modes, environment."""

from __future__ import annotations

from pathlib import Path

import pytest

import frontend
from frontend._env import parse_log_events, read_environment
from frontend.api import resolve_config
from frontend.config import Config


def test_options_reject_unknown_keys_listing_valid_ones() -> None:
    with pytest.raises(frontend.InvalidOptionError) as info:
        frontend.compile(lambda x: x, options={"max_autotoon": True})
    message = str(info.value)
    assert "max_autotoon" in message
    for name in ("max_autotune", "fallback_to_eager", "cudagraphs"):
        assert name in message


def test_options_check_value_types() -> None:
    with pytest.raises(frontend.InvalidOptionError, match="expects bool"):
        frontend.compile(lambda x: x, options={"max_autotune": "yes"})
    with pytest.raises(frontend.InvalidOptionError, match="unknown event"):
        Config().with_options({"logs": "graph_breaks,nonsense"})


def test_torch_style_dotted_keys_are_accepted() -> None:
    resolved = Config().with_options({"triton.cudagraphs": True})
    assert resolved.cudagraphs is True


def test_modes_set_config_and_unknown_mode_lists_valid_ones() -> None:
    base = Config()
    assert resolve_config("inductor", "reduce-overhead", None, base).cudagraphs is True
    tuned = resolve_config("inductor", "max-autotune-no-cudagraphs", None, base)
    assert tuned.max_autotune and not tuned.cudagraphs
    with pytest.raises(frontend.InvalidOptionError, match="reduce-overhead"):
        resolve_config("inductor", "fastest", None, base)
    with pytest.raises(frontend.InvalidOptionError, match="inductor"):
        resolve_config("eager", "reduce-overhead", None, base)


def test_options_override_mode() -> None:
    resolved = resolve_config("inductor", "reduce-overhead", {"cudagraphs": False}, Config())
    assert resolved.cudagraphs is False


def test_patch_is_scoped_and_nested() -> None:
    config = Config()
    assert config.fallback_to_eager is True
    with config.patch(fallback_to_eager=False):
        assert config.fallback_to_eager is False
        with config.patch(fallback_to_eager=True, max_autotune=True):
            assert config.fallback_to_eager and config.max_autotune
        assert config.fallback_to_eager is False and config.max_autotune is False
    assert config.fallback_to_eager is True
    with pytest.raises(frontend.InvalidOptionError):
        with config.patch(no_such_option=1):
            pass


def test_snapshot_is_independent() -> None:
    config = Config()
    snap = config.snapshot()
    with config.patch(max_autotune=True):
        assert snap.max_autotune is False


def test_environment_is_read_in_one_place(tmp_path: Path) -> None:
    env = read_environment({"KILN_DEBUG": "1", "KILN_LOGS": "graph_breaks, recompiles", "KILN_CACHE_DIR": str(tmp_path)})
    assert env.debug is True
    assert env.logs == frozenset({"graph_breaks", "recompiles"})
    assert env.cache_dir == tmp_path
    quiet = read_environment({})
    assert quiet.debug is False and quiet.logs == frozenset({"fallbacks"})
    assert parse_log_events("all") >= {"graph_breaks", "recompiles", "guards"}
    with pytest.raises(ValueError, match="valid events"):
        parse_log_events("graph_brakes")
