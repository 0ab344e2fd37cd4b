"""The one place where Kiln's frontend reads environment variables.

Every other module receives these values through `Config` (see `frontend.config`), never from
`os.environ` directly, so a test or a user can override them in a scope with `config.patch(...)`.

Variables:
  KILN_DEBUG=1          write every compiled graph's artifacts to a debug folder (path printed once)
  KILN_LOGS=a,b,...     log these events: graph_breaks, recompiles, guards, fallbacks, compile ("all" for every one)
  KILN_CACHE_DIR=path   where Kiln keeps its caches and debug folders (default: ~/.cache/kiln or $TMPDIR/kiln)
  KILN_GRAPH_CACHE=0    do not reuse (or save) compiled graphs across processes (default: on)
  KILN_REPRO_AFTER=capture|aotgrad   on a failure, write a runnable repro script of the failing graph
  KILN_REPRO_LEVEL=crash|accuracy    accuracy: also check each compiled graph against eager, minify mismatches
  KILN_REPORT=path.html              write one HTML report of every compile in the process at exit
  KILN_PROGRESS=0                    no progress line for long compiles (shown only on a terminal)
  KILN_CAPTURE_VERBOSE=1, KILN_CAPTURE_SCALAR_OUTPUTS=0, KILN_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS=0
                                     capture's defaults (`capture.CaptureConfig`), passed down as its options
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

LOG_EVENTS: tuple[str, ...] = ("graph_breaks", "recompiles", "guards", "fallbacks", "compile")


@dataclass(frozen=True)
class Environment:
    """The Kiln settings found in the process environment at import time."""

    debug: bool
    logs: frozenset[str]
    cache_dir: Path
    graph_cache: bool = True
    repro_after: str | None = None
    repro_level: str = "crash"
    report: Path | None = None
    progress: bool = True
    capture: Mapping[str, bool] = field(default_factory=dict)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def parse_log_events(text: str) -> frozenset[str]:
    """The set of log events named by a KILN_LOGS value such as ``"graph_breaks,recompiles"``.

    ``"all"`` names every event; an unknown name raises ValueError listing the valid ones.
    """
    names = {part.strip().lstrip("+") for part in text.split(",") if part.strip()}
    if "all" in names:
        return frozenset(LOG_EVENTS)
    unknown = sorted(names - set(LOG_EVENTS))
    if unknown:
        raise ValueError(
            f"KILN_LOGS names unknown event(s) {unknown}; valid events are {', '.join(LOG_EVENTS)} or 'all'"
        )
    return frozenset(names)


def _default_cache_dir(environ: Mapping[str, str]) -> Path:
    xdg = environ.get("XDG_CACHE_HOME")
    home = Path(xdg) if xdg else Path.home() / ".cache"
    try:
        home.mkdir(parents=True, exist_ok=True)
        if os.access(home, os.W_OK):
            return home / "kiln"
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / "kiln"


def read_environment(environ: Mapping[str, str] | None = None) -> Environment:
    """Read the KILN_* variables listed above from `environ` (default: ``os.environ``)."""
    env = os.environ if environ is None else environ
    cache = env.get("KILN_CACHE_DIR")
    try:
        # Without KILN_LOGS, fallbacks to eager are still reported: they change performance silently.
        logs = parse_log_events(env["KILN_LOGS"]) if "KILN_LOGS" in env else frozenset({"fallbacks"})
    except ValueError as error:
        import warnings

        warnings.warn(f"{error}; ignoring KILN_LOGS", stacklevel=2)
        logs = frozenset()
    report = env.get("KILN_REPORT")
    return Environment(
        debug=_truthy(env.get("KILN_DEBUG")),
        logs=logs,
        cache_dir=Path(cache).expanduser() if cache else _default_cache_dir(env),
        graph_cache=(env.get("KILN_GRAPH_CACHE") or "1").strip().lower() not in {"0", "false", "no", "off"},
        repro_after=_choice(env, "KILN_REPRO_AFTER", REPRO_AFTER_CHOICES),
        repro_level=_choice(env, "KILN_REPRO_LEVEL", REPRO_LEVEL_CHOICES) or "crash",
        report=Path(report).expanduser() if report else None,
        progress=env.get("KILN_PROGRESS", "1").strip().lower() not in {"0", "false", "no", "off"},
        capture={
            "verbose": bool(env.get("KILN_CAPTURE_VERBOSE")),
            "capture_scalar_outputs": env.get("KILN_CAPTURE_SCALAR_OUTPUTS", "1") != "0",
            "capture_dynamic_output_shape_ops": env.get("KILN_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS", "1") != "0",
        },
    )


REPRO_AFTER_CHOICES: tuple[str, ...] = ("capture", "aotgrad")
"""KILN_REPRO_AFTER values: the graph a repro script rebuilds (the captured FX graph, or aotgrad's ATen graph)."""

REPRO_LEVEL_CHOICES: tuple[str, ...] = ("crash", "accuracy")
"""KILN_REPRO_LEVEL values: repro scripts for failures only, or also for results that differ from eager."""


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str | None:
    """The value of `name` if it is one of `choices` (None when unset; warned and ignored otherwise)."""
    value = env.get(name, "").strip().lower()
    if not value or value in {"0", "none", "off"}:
        return None
    if value not in choices:
        import warnings

        warnings.warn(f"{name}={value!r} is not one of {', '.join(choices)}; ignoring it", stacklevel=3)
        return None
    return value
