"""Kiln frontend configuration: one typed dataclass, overridable in a scope.

``frontend.config`` is the process default; `frontend.compile` snapshots it when it is called and
merges ``options=`` (validated against the fields below) into that snapshot, so changing
``frontend.config`` later does not change an already-compiled function.

Example::

    with frontend.config.patch(fallback_to_eager=False):
        compiled = frontend.compile(model)   # kernel failures raise instead of falling back
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from frontend._env import LOG_EVENTS, REPRO_AFTER_CHOICES, REPRO_LEVEL_CHOICES, read_environment
from frontend.errors import InvalidOptionError

_ENV = read_environment()


@dataclass
class Config:
    """Everything the frontend and its backends can be told.

    Attributes:
        debug: write each compiled graph's artifacts (FX graph, ATen graphs, IR, kernels, wrapper,
            timings) under `debug_dir` (KILN_DEBUG=1).
        debug_dir: where debug folders go; None means ``cache_dir / "debug"``.
        logs: events to log through Python `logging` (KILN_LOGS): graph_breaks, recompiles, guards,
            fallbacks, compile.
        cache_dir: Kiln's cache directory (KILN_CACHE_DIR).
        graph_cache: reuse compiled graphs saved by earlier processes under `cache_dir`, and save
            new ones (KILN_GRAPH_CACHE=0 turns it off); see `frontend.graph_cache`.
        fallback_to_eager: when a kernel backend cannot compile a graph (no C++ compiler, an
            unsupported op, ...), run that graph eagerly and log why; False raises instead.
        max_autotune: widen kernel autotuning (mode="max-autotune").
        cudagraphs: replay compiled graphs as CUDA graphs (mode="reduce-overhead"); CUDA only.
        cudagraph_max_shapes: how many input shapes one compiled graph records CUDA graphs for
            before it stops recording new ones and runs without replay.
        cudagraph_copy_outputs: copy outputs out of the CUDA graph's memory on every replay, so
            they stay valid across calls; False returns the graph's own buffers (no copies) and
            raises CudaGraphOutputOverwrittenError if one is used after a later replay.
        fallback_random: run random ops eagerly so results match eager PyTorch bit for bit.
        runtime_checks: generated kernels check data-dependent indices (``x[i]``, gather,
            embedding, scatter, index_put, ...) and integer divisors, and raise what eager PyTorch
            raises (``IndexError``, ``RuntimeError``) instead of reading out of bounds or crashing the
            process; False skips the checks (a little faster; an invalid index is then undefined).
        optimize_ddp: cut each graph captured under `DistributedDataParallel` into one subgraph per
            DDP gradient bucket, so each bucket's all-reduce overlaps the backward of the subgraphs
            before it (torch's ``optimize_ddp``); False compiles each graph whole. See
            docs/distributed.md.
    """

    debug: bool = _ENV.debug
    debug_dir: Path | None = None
    logs: frozenset[str] = _ENV.logs
    cache_dir: Path = _ENV.cache_dir
    graph_cache: bool = _ENV.graph_cache
    fallback_to_eager: bool = True
    max_autotune: bool = False
    cudagraphs: bool = False
    cudagraph_max_shapes: int = 8
    cudagraph_copy_outputs: bool = True
    fallback_random: bool = False
    runtime_checks: bool = True
    optimize_ddp: bool = True
    repro_after: str | None = _ENV.repro_after
    repro_level: str = _ENV.repro_level
    repro_dir: Path | None = None
    report: Path | None = _ENV.report
    progress: bool = _ENV.progress
    _patch_stack: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)

    @staticmethod
    def option_names() -> tuple[str, ...]:
        """The keys that ``options=`` and `patch` accept."""
        return tuple(f.name for f in dataclasses.fields(Config) if not f.name.startswith("_"))

    def snapshot(self) -> Config:
        """An independent copy of this configuration (patches are not carried over)."""
        values = {name: getattr(self, name) for name in self.option_names()}
        return Config(**values)

    def with_options(self, options: Mapping[str, Any] | None) -> Config:
        """A copy with `options` applied, after validating every key and value."""
        copy = self.snapshot()
        for name, value in validate_options(options or {}).items():
            setattr(copy, name, value)
        return copy

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator[Config]:
        """Within the ``with`` block, this configuration has `changes` applied; restored afterwards."""
        valid = validate_options(changes)
        saved = {name: getattr(self, name) for name in valid}
        self._patch_stack.append(saved)
        try:
            for name, value in valid.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in self._patch_stack.pop().items():
                setattr(self, name, value)

    def resolved_debug_dir(self) -> Path:
        """The folder under which debug runs are written."""
        return self.debug_dir if self.debug_dir is not None else self.cache_dir / "debug"


_CHOICES: dict[str, tuple[Any, ...]] = {
    "repro_after": (None, *REPRO_AFTER_CHOICES),
    "repro_level": REPRO_LEVEL_CHOICES,
}
"""Options whose value is one of a few names."""


def _field_types() -> dict[str, Any]:
    hints = typing.get_type_hints(Config)
    return {name: hints[name] for name in Config.option_names()}


def _coerce(name: str, expected: Any, value: Any) -> Any:
    """`value` converted to the field's type, or InvalidOptionError saying what was expected."""
    origin = typing.get_origin(expected)
    if name in _CHOICES:
        if value in _CHOICES[name]:
            return value
        choices = ", ".join(repr(choice) for choice in _CHOICES[name])
        raise InvalidOptionError(f"option {name!r} expects one of {choices}, got {value!r}")
    if expected is bool:
        if isinstance(value, bool):
            return value
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif expected is Path or (origin in (types.UnionType, typing.Union) and Path in typing.get_args(expected)):
        if value is None and type(None) in typing.get_args(expected):
            return None
        if isinstance(value, (str, Path)):
            return Path(value)
    elif origin is frozenset:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
            unknown = sorted(set(value) - set(LOG_EVENTS))
            if unknown:
                raise InvalidOptionError(
                    f"option {name!r}: unknown event(s) {unknown}; valid events are {', '.join(LOG_EVENTS)}"
                )
            return frozenset(value)
    type_name = getattr(expected, "__name__", str(expected))
    raise InvalidOptionError(f"option {name!r} expects {type_name}, got {value!r} ({type(value).__name__})")


def validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Check `options` against Config's fields; unknown keys raise with the list of valid keys.

    Dotted torch-style spellings (``"triton.cudagraphs"``) are accepted for their last component.
    """
    if not isinstance(options, Mapping):
        raise InvalidOptionError(f"options must be a dict of option name -> value, got {type(options).__name__}")
    expected_types = _field_types()
    valid: dict[str, Any] = {}
    for key, value in options.items():
        name = str(key).rsplit(".", 1)[-1].replace("-", "_")
        if name not in expected_types:
            raise InvalidOptionError(
                f"unknown option {key!r}; valid options are: {', '.join(Config.option_names())}"
            )
        valid[name] = _coerce(name, expected_types[name], value)
    return valid


def default_config_cache_dir() -> Path:
    """The cache folder the environment gives (KILN_CACHE_DIR or the platform default)."""
    return _ENV.cache_dir


config = Config()
"""The process-wide default configuration; `frontend.compile` takes a snapshot of it."""
