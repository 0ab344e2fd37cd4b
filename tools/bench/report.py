"""Turning job results into the run's report: merged rows, summary, markdown tables and the JSON file.

A row is one (model, task, compiler): the cold job's measurement with the warm job's compile time.
A row counts as passed only if both its cold and warm runs passed; failed rows have no speedup and
never enter a geomean.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tools.bench.results import FAILED, PASSED, JobResult, decode_floats
from tools.bench.stats import geomean, median


@dataclass
class Row:
    """One model, task and compiler: speedup, compile times, memory, accuracy, and why it failed if it did."""

    model: str
    task: str
    compiler: str
    family: str = ""
    status: str = FAILED
    stage: str = ""
    error: str = ""
    source: str = ""
    eager_ms: float | None = None
    compiled_ms: float | None = None
    speedup: float | None = None
    spread: float | None = None
    rel_error: float | None = None
    tolerance: float | None = None
    cold_compile_s: float | None = None
    warm_compile_s: float | None = None
    startup_s: float | None = None
    eager_peak_mb: float | None = None
    compiled_peak_mb: float | None = None
    memory_kind: str = ""
    notes: list[str] = field(default_factory=list)
    process_mode: str = "separate"
    eager_alone_ms: float | None = None

    @property
    def passed(self) -> bool:
        """True when cold and warm runs both gave a right result."""
        return self.status == PASSED


def merge_rows(jobs: Iterable[JobResult]) -> list[Row]:
    """One row per (process mode, model, task, compiler) from cold jobs, with warm compile times and warm
    failures folded in (a warm job's from the same process mode)."""
    rows: dict[tuple[str, str, str, str], Row] = {}
    warm: list[tuple[str, Any]] = []
    for job in jobs:
        for task in job.tasks:
            if job.phase != "cold":
                warm.append((job.process_mode, task))
                continue
            spreads = [
                (t["q3"] - t["q1"]) / t["median"] for t in (task.eager_timing, task.compiled_timing) if t and t.get("median")
            ]
            spread = max(spreads) if spreads else None
            rows[(job.process_mode, task.model, task.task, task.compiler)] = Row(
                task.model, task.task, task.compiler, task.family, task.status, task.stage, task.error, task.source,
                task.eager_ms, task.compiled_ms, task.speedup if task.passed else None, spread,
                task.rel_error, task.tolerance, task.compile_s, None, job.startup_s,
                task.eager_peak_mb, task.compiled_peak_mb, task.memory_kind, list(task.notes),
                job.process_mode, task.eager_alone_ms,
            )
    for mode, task in warm:
        row = rows.get((mode, task.model, task.task, task.compiler))
        if row is None:
            continue
        row.warm_compile_s = task.compile_s
        row.notes += [note for note in task.notes if note not in row.notes]
        if row.passed and not task.passed:
            row.status, row.stage, row.error, row.speedup = task.status, f"warm {task.stage}", task.error, None
    return list(rows.values())


def graph_cache_counts(jobs: Iterable[JobResult]) -> dict[str, dict[str, dict[str, int]]]:
    """Kiln's graph-cache hits and misses per stage, summed per compiler and phase (``"kiln warm"``; in the
    same-process mode ``"kiln warm, same process"``)."""
    totals: dict[str, dict[str, dict[str, int]]] = {}
    for job in jobs:
        name = f"{job.compiler} {job.phase}" + ("" if job.process_mode == "separate" else f", {job.process_mode} process")
        for stage, counts in job.cache_counts.items():
            slot = totals.setdefault(name, {}).setdefault(stage, {"hits": 0, "misses": 0})
            for kind in ("hits", "misses"):
                slot[kind] += int(counts.get(kind, 0))
    return totals


def _ratio(numerator: float | None, denominator: float | None) -> str:
    if numerator is None or not denominator:
        return "-"
    return f"{numerator / denominator:.0%}"


@dataclass
class CompilerSummary:
    """One compiler over the whole run."""

    compiler: str
    passed: int
    total: int
    geomean_speedup: float | None
    common_rows: int
    geomean_speedup_common: float | None
    cold_compile_s_common: float | None
    warm_compile_s_common: float | None
    median_startup_s: float | None
    failures: list[str] = field(default_factory=list)


def summarize_rows(rows: Sequence[Row]) -> list[CompilerSummary]:
    """Per compiler: pass count, geomean speedup over its passed rows, and over the rows every compiler passed.

    Compile-second totals cover the common rows, so compilers are compared on the same work.
    """
    compilers = list(dict.fromkeys(row.compiler for row in rows))
    keys = {(row.model, row.task) for row in rows}
    common = {key for key in keys if all(r.passed for r in rows if (r.model, r.task) == key)}
    summaries = []
    for compiler in compilers:
        mine = [row for row in rows if row.compiler == compiler]
        passed = [row for row in mine if row.passed and row.speedup is not None]
        shared = [row for row in passed if (row.model, row.task) in common]
        startups = [row.startup_s for row in mine if row.startup_s is not None]
        summaries.append(
            CompilerSummary(
                compiler=compiler,
                passed=len(passed),
                total=len(mine),
                geomean_speedup=geomean(row.speedup for row in passed if row.speedup is not None),
                common_rows=len(shared),
                geomean_speedup_common=geomean(row.speedup for row in shared if row.speedup is not None),
                cold_compile_s_common=_total(row.cold_compile_s for row in shared),
                warm_compile_s_common=_total(row.warm_compile_s for row in shared),
                median_startup_s=median(startups) if startups else None,
                failures=[f"{row.model}/{row.task}: {row.stage}: {row.error}" for row in mine if not row.passed],
            )
        )
    return summaries


def _total(values: Iterable[float | None]) -> float | None:
    items = list(values)
    return None if not items or any(v is None for v in items) else sum(v for v in items if v is not None)


def _num(value: float | None, digits: int = 2, suffix: str = "") -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.{digits}f}{suffix}"


def _sci(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *body)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |"]
    lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in body]
    return lines


NOISY_SPREAD = 0.10  # interquartile range over median above which a speedup is marked noisy


EAGER_SPREAD = 0.15
"""How far eager's medians for one model and task may differ between the compilers' rows before the report
flags it. On the H200 host, host-bound models' eager time moved by up to 1.7x between processes (ResNet-18,
DistilBERT, GPT-2 inference, 2026-11-30) while GPU-bound ones (ViT-B/16, ConvNeXt-Tiny) moved by under 1%."""


def eager_differs(values: Sequence[float]) -> bool:
    """Whether eager's medians (one per compiler's row) spread by more than `EAGER_SPREAD`."""
    return len(values) > 1 and min(values) > 0 and max(values) / min(values) > 1 + EAGER_SPREAD


def _speedup_cell(row: Row | None) -> str:
    if row is None:
        return "-"
    if row.passed:
        marks = ("~" if row.spread is not None and row.spread > NOISY_SPREAD else "") + ("*" if row.notes else "")
        return _num(row.speedup, 2, "x") + marks
    return "skipped" if row.status == "skipped" else f"FAIL ({row.stage})"


def render_markdown(rows: Sequence[Row], meta: dict[str, Any], heading: str = "") -> str:
    """The run's report as markdown: speedups, compile seconds, memory, accuracy, summary and failures.

    `rows` are of one process mode; `heading` is added to the title (which mode, in a report of several).
    """
    compilers = list(dict.fromkeys(row.compiler for row in rows))
    keys = list(dict.fromkeys((row.model, row.task) for row in rows))
    by_key = {(row.model, row.task, row.compiler): row for row in rows}

    def eager_ms(model: str, task: str) -> str:
        values = [r.eager_ms for c in compilers if (r := by_key.get((model, task, c))) and r.eager_ms is not None]
        if not values:
            return "-"
        if eager_differs(values):
            return f"{_num(min(values), 3)}-{_num(max(values), 3)} !"
        return _num(median(values), 3)

    alone = {(r.model, r.task): r.eager_alone_ms for r in rows if r.eager_alone_ms is not None}
    title = f"# Kiln benchmark: {meta.get('device', '?')} ({meta.get('date', '')})"
    lines = [f"{title}{f', {heading}' if heading else ''}", ""]
    lines += [f"- {key}: {value}" for key, value in meta.get("environment", {}).items()]
    lines += [f"- {key}: {meta[key]}" for key in ("commit", "load_average", "wall_s", "worker_cpu_s") if key in meta]
    lines += [f"- command: `{meta.get('command', '')}`", ""]
    lines += ["## Speedup over eager (median time per call; FAIL = wrong or no result, never counted)", ""]
    alone_header = ["eager ms alone"] if alone else []

    def alone_cell(model: str, task: str) -> list[str]:
        return [_num(alone.get((model, task)), 3)] if alone else []

    lines += _table(
        ["model", "task", "eager ms", *alone_header, *compilers],
        [[m, t, eager_ms(m, t), *alone_cell(m, t), *[_speedup_cell(by_key.get((m, t, c))) for c in compilers]]
         for m, t in keys],
    )
    lines += ["", f"~ noisy: the middle half of eager's or the compiled timings spans more than {NOISY_SPREAD:.0%} of "
              "the median.", "* the compiler logged warnings while compiling (listed below; e.g. a fallback to eager)."]
    if any(eager_differs([r.eager_ms for r in rows if (r.model, r.task) == key and r.eager_ms is not None]) for key in keys):
        lines += [f"! eager's own time differed by more than {EAGER_SPREAD:.0%} between the compilers' rows (each "
                  "timed in its own process, or after another compiler): compare the speedups, each over eager "
                  "timed alongside that compiler, not compiled milliseconds across rows."]
    if alone:
        lines += ["eager ms alone: eager timed on its own in the same process, before (eager-first order) or after "
                  "(kiln-first) the compilers; eager ms: eager timed alternately with each compiler (their median)."]
    lines += ["", "## Compile seconds, cold / warm (cold: empty caches; warm: populated caches, new process)", ""]
    lines += _table(
        ["model", "task", *compilers],
        [[m, t, *[_compile_cell(by_key.get((m, t, c))) for c in compilers]] for m, t in keys],
    )
    lines += ["", "## Peak memory MiB, eager / compiled (GPU: allocated by a step above what was resident; CPU: peak RSS)", ""]
    lines += _table(
        ["model", "task", *compilers],
        [[m, t, *[_memory_cell(by_key.get((m, t, c))) for c in compilers]] for m, t in keys],
    )
    lines += ["", "## Relative error vs eager (tolerance)", ""]
    lines += _table(
        ["model", "task", *compilers],
        [[m, t, *[_error_cell(by_key.get((m, t, c))) for c in compilers]] for m, t in keys],
    )
    summaries = summarize_rows(rows)
    lines += ["", "## Summary", ""]
    lines += _table(
        ["compiler", "passed", "geomean speedup", "geomean (rows all passed)", "cold compile s", "warm compile s",
         "warm / cold", "start-up s"],
        [
            [
                s.compiler, f"{s.passed}/{s.total}", _num(s.geomean_speedup, 2, "x"),
                f"{_num(s.geomean_speedup_common, 2, 'x')} over {s.common_rows}",
                _num(s.cold_compile_s_common, 1), _num(s.warm_compile_s_common, 1),
                _ratio(s.warm_compile_s_common, s.cold_compile_s_common), _num(s.median_startup_s, 1),
            ]
            for s in summaries
        ],
    )
    lines += ["", "Compile totals are over the rows every compiler passed; start-up is the median one-time cost of a",
              "compiler in a fresh process (a tiny probe compiled before the model), not included in the rows."]
    cache = meta.get("graph_cache") or {}
    if cache:
        stages = list(dict.fromkeys(stage for counts in cache.values() for stage in counts))
        lines += ["", "## Kiln graph cache: hits / misses per stage (per process; start-up probes included)", ""]
        lines += _table(
            ["compiler, phase", *stages],
            [[name, *[f"{c['hits']} / {c['misses']}" if (c := counts.get(stage)) else "-" for stage in stages]]
             for name, counts in cache.items()],
        )
    failures = [f"- {s.compiler} {failure}" for s in summaries for failure in s.failures]
    if failures:
        lines += ["", "## Failures", "", *failures]
    notes = [f"- {row.compiler} {row.model}/{row.task}: {note}" for row in rows for note in row.notes]
    if notes:
        lines += ["", "## Compile warnings", "", *notes]
    return "\n".join(lines) + "\n"


def _compile_cell(row: Row | None) -> str:
    if row is None or (row.cold_compile_s is None and row.warm_compile_s is None):
        return "-"
    return f"{_num(row.cold_compile_s, 1)} / {_num(row.warm_compile_s, 1)}"


def _memory_cell(row: Row | None) -> str:
    if row is None or row.eager_peak_mb is None:
        return "-"
    return f"{_num(row.eager_peak_mb, 0)} / {_num(row.compiled_peak_mb, 0)}"


def _error_cell(row: Row | None) -> str:
    if row is None or row.rel_error is None:
        return "-"
    return f"{_sci(row.rel_error)} ({_sci(row.tolerance)})"


def report_json(rows: Sequence[Row], jobs: Sequence[JobResult], meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON document of a run: metadata, merged rows, per-compiler summary and every raw job result."""
    return {
        "meta": meta,
        "rows": [dataclasses.asdict(row) for row in rows],
        "summary": [
            {**dataclasses.asdict(summary), "process_mode": mode}
            for mode in dict.fromkeys(row.process_mode for row in rows)
            for summary in summarize_rows([row for row in rows if row.process_mode == mode])
        ],
        "jobs": [job.to_json() for job in jobs],
    }


def rows_from_json(document: dict[str, Any]) -> list[Row]:
    """The rows of a JSON document written by `report_json` (after `jsonable`)."""
    return [Row(**decode_floats(Row, row)) for row in document["rows"]]


def jsonable(value: Any) -> Any:
    """`value` with non-finite floats spelled as strings ("inf", "nan"), which strict JSON cannot hold."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value
