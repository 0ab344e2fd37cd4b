"""Kiln frontend configuration: one typed dataclass, overridable in a scope.

``frontend.config`` is the process default; `frontend.compile` snapshots it when it is called and
merges ``options=`` (validated against the fields below) into that snapshot, so changing
``frontend.config`` later does not change an already-compiled function. Options of the stages below
(``"capture.cache_size_limit"``, ``"inductor_ir.layout_optimization"``, ``"cpu.vectorize"``, ...) are
kept in `Config.stage_options`, checked by the stage that owns them (see `frontend.stage_options`),
and handed down as each stage's typed config (`Config.capture_config`, `aot_config`,
`inductor_config`, `kernel_backend_options`).

Example::

    with frontend.config.patch(fallback_to_eager=False):
        compiled = frontend.compile(model)   # kernel failures raise instead of falling back
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aotgrad
import capture
import inductor_ir
from frontend._env import LOG_EVENTS, REPRO_AFTER_CHOICES, REPRO_LEVEL_CHOICES, read_environment
from frontend.errors import InvalidOptionError
from frontend.stage_options import STAGES, check_stage_option, is_stage_namespace, kernel_backend_entries

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
    stage_options: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: {"capture": dict(_ENV.capture)})
    _patch_stack: list[dict[str, Any]] = field(default_factory=list, repr=False, compare=False)

    @staticmethod
    def option_names() -> tuple[str, ...]:
        """The frontend's own keys that ``options=`` and `patch` accept (stages' keys are ``"<stage>.<name>"``)."""
        return tuple(f.name for f in dataclasses.fields(Config) if not f.name.startswith("_") and f.name != "stage_options")

    def snapshot(self) -> Config:
        """An independent copy of this configuration (patches are not carried over)."""
        values = {name: getattr(self, name) for name in self.option_names()}
        return Config(**values, stage_options={stage: dict(given) for stage, given in self.stage_options.items()})

    def with_options(self, options: Mapping[str, Any] | None) -> Config:
        """A copy with `options` applied, after validating every key and value."""
        copy = self.snapshot()
        _apply(copy, validate_options(options or {}))
        return copy

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator[Config]:
        """Within the ``with`` block, this configuration has `changes` applied; restored afterwards.

        A stage's option is given with its dotted name: ``patch(**{"capture.cache_size_limit": 2})``.
        """
        valid = validate_options(changes)
        saved = {name: getattr(self, name) for name in valid if "." not in name}
        saved["stage_options"] = self.stage_options
        self._patch_stack.append(saved)
        try:
            _apply(self, valid)
            yield self
        finally:
            for name, value in self._patch_stack.pop().items():
                setattr(self, name, value)

    # ------------------------------------------------------------------ each stage's typed options
    def capture_config(self) -> capture.CaptureConfig:
        """capture's config: the ``KILN_CAPTURE_*`` environment and the ``"capture.*"`` options."""
        return capture.CaptureConfig.parse_options(self.stage_options.get("capture", {}))

    def aot_config(self) -> aotgrad.AotConfig:
        """aotgrad's config: `fallback_to_eager`, then the ``"aotgrad.*"`` options."""
        given = {"fallback_to_eager": self.fallback_to_eager, **self.stage_options.get("aotgrad", {})}
        return aotgrad.AotConfig.parse_options(given)

    def inductor_config(self) -> inductor_ir.InductorIRConfig:
        """inductor_ir's config (`compile_graph`): the ``"inductor_ir.*"`` options."""
        return inductor_ir.InductorIRConfig.parse_options(self.stage_options.get("inductor_ir", {}))

    def kernel_backend_options(self, device_type: str) -> dict[str, Any]:
        """What the kernel backend of `device_type` parses: inductor_ir's common backend options from
        this config, then the ``"<device_type>.*"`` options."""
        return {
            "max_autotune": self.max_autotune,
            "fallback_random": self.fallback_random,
            "runtime_checks": self.runtime_checks,
            "cache_root": self.cache_dir,
            **self.stage_options.get(device_type, {}),
        }

    def stage_option_items(self) -> dict[str, Any]:
        """Every stage option in force, by its dotted name (``{"capture.verbose": False, ...}``)."""
        return {f"{stage}.{name}": value for stage, given in self.stage_options.items() for name, value in given.items()}

    def resolved_debug_dir(self) -> Path:
        """The folder under which debug runs are written."""
        return self.debug_dir if self.debug_dir is not None else self.cache_dir / "debug"


_CHOICES: dict[str, tuple[Any, ...]] = {
    "repro_after": (None, *REPRO_AFTER_CHOICES),
    "repro_level": REPRO_LEVEL_CHOICES,
}
"""Options whose value is one of a few names."""


@functools.cache
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


def _namespaces() -> str:
    devices = ", ".join(sorted(kernel_backend_entries())) or "none installed"
    stages = ", ".join(f"'{stage}.<name>'" for stage in STAGES)
    return f"each stage's own options are {stages} and '<device>.<name>' for a device's kernel backend ({devices})"


def validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Check `options` against Config's fields and the stages' options; unknown keys raise listing the valid ones.

    A key ``"<stage>.<name>"`` whose prefix is a stage (capture, aotgrad, inductor_ir) or a device type
    with a kernel backend (cpu, cuda, ...) is checked by that stage and kept under its dotted name.
    Other dotted torch-style spellings (``"triton.cudagraphs"``) are read by their last component.
    """
    if not isinstance(options, Mapping):
        raise InvalidOptionError(f"options must be a dict of option name -> value, got {type(options).__name__}")
    expected_types = _field_types()
    valid: dict[str, Any] = {}
    for key, value in options.items():
        prefix, dot, rest = str(key).partition(".")
        if dot and is_stage_namespace(prefix):
            check_stage_option(prefix, rest, value)
            valid[f"{prefix}.{rest}"] = value
            continue
        name = str(key).rsplit(".", 1)[-1].replace("-", "_")
        if name not in expected_types:
            raise InvalidOptionError(
                f"unknown option {key!r}; valid options are: {', '.join(Config.option_names())}; {_namespaces()}"
            )
        valid[name] = _coerce(name, expected_types[name], value)
    return valid


def _apply(target: Config, valid: Mapping[str, Any]) -> None:
    """Set validated options on `target`: its own fields, and stage options into a new `stage_options`."""
    stages = {stage: dict(given) for stage, given in target.stage_options.items()}
    for key, value in valid.items():
        stage, dot, name = key.partition(".")
        if dot:
            stages.setdefault(stage, {})[name] = value
        else:
            setattr(target, key, value)
    target.stage_options = stages


config = Config()
"""The process-wide default configuration; `frontend.compile` takes a snapshot of it."""
