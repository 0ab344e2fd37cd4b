"""What a compile does for repro scripts: remember each graph, write a script when one fails.

One `ReproRecorder` per `frontend.compile` call (``context.repro``), present only when
``config.repro_after`` (KILN_REPRO_AFTER) or ``repro_level="accuracy"`` asks for it. The backend
driver notes each captured FX graph, aotgrad's compilers note each ATen graph (with the FX graph it
came from); `write_failure` turns the failing one into a script, and `checked` wraps a compiled
graph so that its first call is compared with eager (accuracy level).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

import aotgrad
from frontend.config import Config
from frontend.errors import describe_error
from frontend.logs import EventLog
from frontend.repro.accuracy import compare, float64_copy, to_float64
from frontend.repro.inputs import DEFAULT_SAVED_BYTES
from frontend.repro.minifier import root_cause, write_minified
from frontend.repro.script import ReproSpec, render_script, write_script
from frontend.repro.stages import clone_inputs

CODEGEN_OPTIONS = ("fallback_random", "runtime_checks", "max_autotune")
"""Config options a repro script carries: those that change the generated code (with the options of
the stages after capture, ``"aotgrad.*"``, ``"inductor_ir.*"`` and ``"<device>.*"``, as they were given)."""

ATEN_LEVEL_BACKENDS = ("inductor", "aot_eager")
"""Backends whose ATen-graph compiler a repro script can call on its own (see stages.py)."""


@dataclass
class GraphRecord:
    """A graph a repro may rebuild: the graph, its example inputs, its level, where it came from."""

    graph_module: torch.fx.GraphModule
    inputs: list[Any]
    after: str
    backend: str
    parent: GraphRecord | None = None


def resolved_repro_after(config: Config) -> str | None:
    """The graph level repros are written at (None: off); the accuracy level defaults to "aotgrad"."""
    if config.repro_after is not None:
        return config.repro_after
    return "aotgrad" if config.repro_level == "accuracy" else None


class ReproRecorder:
    """Writes repro scripts for one compiled function's failing graphs (see the module docstring)."""

    def __init__(self, config: Config, label: str, after: str) -> None:
        self.after = after
        self.accuracy = config.repro_level == "accuracy"
        self.folder: Path = config.repro_dir if config.repro_dir is not None else config.cache_dir / "repro"
        self.label = label
        self.options = {name: getattr(config, name) for name in CODEGEN_OPTIONS}
        self.options.update(
            (key, value) for key, value in config.stage_option_items().items()
            if not key.startswith("capture.") and isinstance(value, (bool, int, float, str, type(None)))
        )
        self.saved_bytes = DEFAULT_SAVED_BYTES
        self.log = EventLog(frozenset({"repro"}))
        self._graphs: dict[int, GraphRecord] = {}

    @classmethod
    def for_config(cls, config: Config, label: str) -> ReproRecorder | None:
        """A recorder when `config` asks for repro scripts, else None."""
        after = resolved_repro_after(config)
        return cls(config, label, after) if after is not None else None

    def note_captured(self, gm: torch.fx.GraphModule, inputs: list[Any], backend: str) -> GraphRecord:
        """Remember a captured FX graph handed to `backend`."""
        record = GraphRecord(gm, list(inputs), "capture", backend)
        self._graphs[id(gm)] = record
        return record

    def note_aten(self, gm: torch.fx.GraphModule, inputs: list[Any], parent: torch.fx.GraphModule) -> GraphRecord | None:
        """Remember an ATen graph aotgrad made from the captured graph `parent`."""
        origin = self._graphs.get(id(parent))
        if origin is None:
            return None
        record = GraphRecord(gm, list(inputs), "aotgrad", origin.backend, origin)
        self._graphs[id(gm)] = record
        return record

    def _level_record(self, gm: torch.fx.GraphModule) -> GraphRecord | None:
        """The record a repro of `gm` uses: at the level asked for, or the captured graph when needed."""
        record = self._graphs.get(id(gm))
        if record is None:
            return None
        if record.parent is not None and (self.after == "capture" or record.backend not in ATEN_LEVEL_BACKENDS):
            return record.parent
        return record

    def write_failure(self, gm: torch.fx.GraphModule, error: BaseException) -> Path | None:
        """Write a repro script for `gm`, which raised `error`; None if `gm` is unknown or writing failed.

        The path is also kept on the error (``error.kiln_repro``) so that it is written once.
        """
        written = written_repro(error)
        if written is not None:
            return written
        record = self._level_record(gm)
        if record is None:
            return None
        spec = ReproSpec(record.after, record.backend, "crash", self.options, describe_error(root_cause(error)))
        try:
            text = render_script(record.graph_module, record.inputs, spec, self.saved_bytes)
            path = write_script(self.folder, f"repro_{_stem(self.label)}", text)
        except Exception as problem:  # a repro is a courtesy: never let it hide the real failure
            self.log.emit("repro", f"{self.label}: could not write a repro script ({describe_error(problem)})")
            return None
        for target in (error, root_cause(error)):
            try:
                target.kiln_repro = path  # type: ignore[attr-defined]
            except AttributeError:
                pass
        self.log.emit("repro", f"{self.label}: wrote a repro script of the failing graph: {path} (run it with python)")
        return path

    def checked(self, gm: torch.fx.GraphModule, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """`compiled`, comparing its first call with eager (accuracy level at `gm`'s level), else as it is."""
        record = self._graphs.get(id(gm))
        if not self.accuracy or record is None or record.after != self.after:
            return compiled
        if record.after == "aotgrad" and record.backend not in ATEN_LEVEL_BACKENDS:
            return compiled
        checker = _BoxedAccuracyCheck if aotgrad.is_boxed(compiled) else _AccuracyCheck
        return checker(compiled, lambda inputs, outputs: self._check(record, inputs, outputs))

    def _check(self, record: GraphRecord, inputs: list[Any], outputs: Any) -> None:
        """Compare one call's `outputs` with eager's; on a mismatch, minify and write a repro."""
        gm = record.graph_module
        try:
            with torch.no_grad():
                expected = gm(*clone_inputs(inputs))
            mismatch = compare(outputs, expected, lambda: float64_copy(gm)(*to_float64(clone_inputs(inputs))))
        except Exception as problem:
            self.log.emit("repro", f"{self.label}: could not check this graph against eager ({describe_error(problem)})")
            return
        if mismatch is None:
            return
        self.log.emit("repro", f"{self.label}: compiled result differs from eager: {mismatch.describe()}; minifying...")
        spec = ReproSpec(record.after, record.backend, "accuracy", self.options, mismatch.describe())
        stem = f"repro_{_stem(self.label)}_accuracy"
        try:
            path, shrunk = write_minified(gm, inputs, spec, self.folder, stem, self.saved_bytes)
            ops = sum(1 for node in shrunk.graph_module.graph.nodes if node.op.startswith("call_"))
            self.log.emit("repro", f"{self.label}: wrote a minified repro ({ops} ops, {shrunk.tries} tries): {path}")
        except Exception as problem:
            path = write_script(self.folder, stem, render_script(gm, inputs, spec, self.saved_bytes))
            self.log.emit("repro", f"{self.label}: minifying failed ({describe_error(problem)}); full repro: {path}")
        print(f"[kiln] accuracy repro: {path}", file=sys.stderr)


def written_repro(error: BaseException) -> Path | None:
    """The repro script already written for `error` or one of its causes, if any."""
    current: BaseException | None = error
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        path = getattr(current, "kiln_repro", None)
        if isinstance(path, Path):
            return path
        current = current.__cause__ or current.__context__
    return None


def _stem(label: str) -> str:
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in label)[:60] or "graph"


class _AccuracyCheck:
    """Calls a compiled graph; its first call's inputs and outputs also go to a checker."""

    def __init__(self, compiled: Callable[..., Any], check: Callable[[list[Any], Any], None]) -> None:
        self._compiled = compiled
        self._check: Callable[[list[Any], Any], None] | None = check
        self.compiled = getattr(compiled, "compiled", compiled)

    def __call__(self, *args: Any) -> Any:
        check, self._check = self._check, None
        if check is None:
            return self._compiled(*args)
        inputs = clone_inputs(list(args))
        outputs = self._compiled(*args)
        check(inputs, outputs)
        return outputs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compiled, name)


class _BoxedAccuracyCheck(_AccuracyCheck):
    """`_AccuracyCheck` for a compiled graph called boxed (``fn(args)``)."""

    boxed_call: Literal[True] = True

    def __call__(self, args: list[Any]) -> Any:  # type: ignore[override]
        check, self._check = self._check, None
        if check is None:
            return self._compiled(args)
        inputs = clone_inputs(list(args))
        outputs = self._compiled(args)
        check(inputs, outputs)
        return outputs
