"""The records a run produces: one `TaskResult` per (model, task, compiler, phase), gathered per job.

They travel from the worker subprocess to the runner as JSON, so every field is a plain value.
"""

from __future__ import annotations

import dataclasses
import logging
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


@dataclass
class TaskResult:
    """One model, task and compiler in one phase ("cold": empty caches, measured; "warm": populated caches).

    `status` is "passed" only when the compiled result matched eager on both checks (the compile
    inputs and fresh inputs after timing); a failed row keeps `stage` (build, eager, compile,
    accuracy, measure, fresh_inputs, process) and the first line of the error in `error`. Times are
    milliseconds per call (medians, with quartiles in `*_timing`); compile times are seconds from
    the compile call to the end of the first compiled call; memory is MiB. `notes` are the distinct
    warnings logged while compiling (a compiler falling back to eager says so there). In the same-process
    mode `eager_alone_ms` is eager's median measured on its own at its place in the order (first, before any
    compiler ran, or last), the baseline a notebook's "eager, then compiled" ratio uses.
    """

    model: str
    task: str
    compiler: str
    phase: str
    family: str = ""
    status: str = FAILED
    stage: str = ""
    error: str = ""
    traceback: str = ""
    source: str = ""
    eager_ms: float | None = None
    compiled_ms: float | None = None
    speedup: float | None = None
    round_speedups: list[float] = field(default_factory=list)
    eager_timing: dict[str, float] | None = None
    compiled_timing: dict[str, float] | None = None
    rel_error: float | None = None
    tolerance: float | None = None
    worst_tensor: str = ""
    fp64_error: float | None = None
    eager_fp64_error: float | None = None
    fp64_sensitivity: float | None = None
    compile_s: float | None = None
    eager_peak_mb: float | None = None
    compiled_peak_mb: float | None = None
    memory_kind: str = ""
    notes: list[str] = field(default_factory=list)
    eager_alone_ms: float | None = None

    @property
    def passed(self) -> bool:
        """True when the row's result was right and it was measured."""
        return self.status == PASSED

    def fail(self, stage: str, error: BaseException | str) -> TaskResult:
        """Mark this row failed at `stage`, keeping the error's first line (and its traceback tail)."""
        self.status, self.stage = FAILED, stage
        self.speedup = None  # a failed row is never fast
        if isinstance(error, BaseException):
            self.error = first_line(error)
            self.traceback = "".join(traceback.format_exception(error)[-12:])
        else:
            self.error = error
        return self


@dataclass
class JobResult:
    """Everything one worker process measured: its tasks, the compiler's start-up time, the environment."""

    model: str
    compiler: str
    phase: str
    device: str
    startup_s: float | None = None
    startup_error: str = ""
    wall_s: float | None = None
    environment: dict[str, str] = field(default_factory=dict)
    compile_stages: dict[str, float] = field(default_factory=dict)
    cache_counts: dict[str, dict[str, int]] = field(default_factory=dict)  # Kiln's graph cache, per stage
    tasks: list[TaskResult] = field(default_factory=list)
    process_mode: str = "separate"  # "same": the process also ran the model's other compilers, before or after
    threads: int | None = None  # CPU: the thread count the job ran with

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> JobResult:
        """The inverse of `to_json`."""
        tasks = [TaskResult(**decode_floats(TaskResult, task)) for task in data.get("tasks", [])]
        return JobResult(**{**decode_floats(JobResult, data), "tasks": tasks})


def decode_floats(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """`data` for dataclass `cls` with float fields spelled as strings ("inf", "nan") turned back into floats."""
    floats = {f.name for f in dataclasses.fields(cls) if "float" in str(f.type)}
    return {key: float(value) if key in floats and isinstance(value, str) else value for key, value in data.items()}


def first_line(error: BaseException) -> str:
    """`"TypeName: first line of the message"`, the way failed rows show an error."""
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0]}" if message else type(error).__name__


class WarningRecorder(logging.Handler):
    """Collects the distinct warnings (`logging` records at WARNING and above, and `warnings.warn`) of a block.

    >>> with WarningRecorder() as recorder:
    ...     logging.getLogger("x").warning("running this graph eagerly")
    >>> recorder.messages
    ['x: running this graph eagerly']
    """

    def __init__(self, limit: int = 20) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.limit = limit
        self._warnings: Any = None

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the record's first line (logging.Handler's hook)."""
        message = record.getMessage()
        self._add(message if message.startswith(f"{record.name}:") else f"{record.name}: {message}")

    def _add(self, message: str) -> None:
        line = (message.strip().splitlines() or [""])[0][:300]
        if line and line not in self.messages and len(self.messages) < self.limit:
            self.messages.append(line)

    def __enter__(self) -> WarningRecorder:
        logging.getLogger().addHandler(self)
        self._warnings = warnings.catch_warnings(record=True)
        self._caught = self._warnings.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc_info: object) -> None:
        logging.getLogger().removeHandler(self)
        self._warnings.__exit__(*exc_info)
        for caught in self._caught:
            self._add(f"{caught.category.__name__}: {caught.message}")
