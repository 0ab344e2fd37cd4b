"""A CPU thread sweep: the same suite at several thread counts, summarized in one table.

`python -m tools.bench --device cpu --threads 1,4,8,16` runs the whole harness once per thread
count (each run is an ordinary report of its own) and then prints, per thread count and compiler,
the pass count, the geomean speedup over eager (over every compiler's passed rows, so compilers
are compared on the same work), Kiln's geomean relative to torch.compile's, the geomean of
torch.compile's time over Kiln's on the rows both passed, and the slowest row (a row slower than eager
is what a sweep is meant to catch).

The two Kiln-vs-torch.compile columns can disagree: each speedup divides by the eager time measured
alongside that compiler (paired calls), and eager's own time moves with what ran before it in the
process (the allocator's state, caches: on a 32-core host a resnet_tiny inference step of eager took
16.3 ms timed next to torch.compile and 13.9 ms next to Kiln, 10.5 ms alone). The time ratio compares
the compilers' own milliseconds, measured on one machine (and in one process with `--process-mode same`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tools.bench.report import Row, rows_from_json, summarize_rows
from tools.bench.stats import geomean

__all__ = ["SweepLine", "parse_threads", "render_sweep", "sweep_lines"]


def parse_threads(text: str) -> tuple[int, ...]:
    """`"1,4,8,16"` -> `(1, 4, 8, 16)`; raises ValueError for an entry that is not a positive integer."""
    counts = []
    for raw in (part.strip() for part in text.split(",")):
        if not raw:
            continue
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"--threads: {raw!r} is not a positive integer (e.g. --threads 1,4,8,16)")
        counts.append(int(raw))
    if not counts:
        raise ValueError("--threads: give at least one thread count (e.g. --threads 8 or --threads 1,4,8,16)")
    return tuple(dict.fromkeys(counts))


@dataclass(frozen=True)
class SweepLine:
    """One compiler at one thread count."""

    threads: int
    compiler: str
    passed: int
    total: int
    geomean_common: float | None
    common_rows: int
    slowest: Row | None
    time_ratio: float | None = None  # Kiln: torch.compile's ms over Kiln's, geomean over rows both passed


def sweep_lines(documents: Sequence[tuple[int, dict[str, Any]]]) -> list[SweepLine]:
    """The summary lines of (thread count, report document) pairs, in order."""
    lines = []
    for threads, document in documents:
        rows = rows_from_json(document)
        for summary in summarize_rows(rows):
            passed = [r for r in rows if r.compiler == summary.compiler and r.passed and r.speedup is not None]
            slowest = min(passed, key=lambda r: r.speedup or 0.0, default=None)
            lines.append(
                SweepLine(
                    threads, summary.compiler, summary.passed, summary.total,
                    summary.geomean_speedup_common, summary.common_rows, slowest,
                    _time_ratio(summary.compiler, rows),
                )
            )
    return lines


def _time_ratio(compiler: str, rows: Sequence[Row]) -> float | None:
    """For a Kiln compiler: torch.compile's compiled milliseconds over Kiln's, geomean over the rows both passed."""
    if not compiler.startswith("kiln"):
        return None
    reference = compiler.replace("kiln", "torch.compile", 1)

    def times(label: str) -> dict[tuple[str, str, str], float]:
        return {
            (r.process_mode, r.model, r.task): r.compiled_ms
            for r in rows
            if r.compiler == label and r.passed and r.compiled_ms
        }

    mine, theirs = times(compiler), times(reference)
    return geomean(theirs[key] / mine[key] for key in mine.keys() & theirs.keys())


def _ratio(line: SweepLine, lines: Sequence[SweepLine]) -> str:
    """Kiln's geomean over torch.compile's at the same thread count (on the same rows)."""
    if not line.compiler.startswith("kiln"):
        return ""
    reference_label = line.compiler.replace("kiln", "torch.compile", 1)
    reference = next((r for r in lines if r.threads == line.threads and r.compiler == reference_label), None)
    if reference is None or not reference.geomean_common or not line.geomean_common:
        return ""
    return f"{line.geomean_common / reference.geomean_common:.2f}x"


def render_sweep(documents: Sequence[tuple[int, dict[str, Any]]], command: str) -> str:
    """A Markdown table of the sweep (see the module docstring)."""
    lines = sweep_lines(documents)
    meta = documents[0][1]["meta"] if documents else {}
    out = [
        f"## CPU thread sweep: {meta.get('date', '?')}, {meta.get('host', '?')}",
        "",
        f"`{command}`",
        "",
        "| threads | compiler | passed | geomean vs eager (common rows) | vs torch.compile | torch.compile ms / Kiln ms "
        "| slowest row |",
        "| ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for line in lines:
        slowest = (
            f"{line.slowest.model}/{line.slowest.task} {line.slowest.speedup:.2f}x"
            if line.slowest is not None and line.slowest.speedup is not None
            else "-"
        )
        geomean = f"{line.geomean_common:.2f}x over {line.common_rows}" if line.geomean_common else "-"
        time_ratio = f"{line.time_ratio:.2f}x" if line.time_ratio else ""
        out.append(
            f"| {line.threads} | {line.compiler} | {line.passed}/{line.total} | {geomean} | "
            f"{_ratio(line, lines)} | {time_ratio} | {slowest} |"
        )
    return "\n".join(out) + "\n"
