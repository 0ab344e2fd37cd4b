"""Separate processes against one process: a report of several process modes, and their comparison table.

`--process-mode both` runs the suite twice: a process per model and compiler ("separate"), then one
process per model running every compiler in turn ("same"). The report has each mode's usual tables and
a comparison: per model, task and compiler, the speedup over eager in each mode, their ratio, and in
the same-process mode also the speedup over eager timed on its own (a notebook's "eager first, then
compiled" ratio). A row is flagged where the modes' speedups differ by more than 10%, or the row passes
in one mode only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tools.bench.report import Row, _num, _speedup_cell, _table, render_markdown
from tools.bench.stats import geomean

MODES_DISAGREE = 0.10  # relative difference of the two modes' speedups above which a row is flagged
HEADINGS = {"separate": "separate processes (one per model and compiler)", "same": "same process (one per model)"}


@dataclass(frozen=True)
class ModeComparison:
    """One model, task and compiler in both process modes (None where a mode did not run it)."""

    model: str
    task: str
    compiler: str
    separate: Row | None
    same: Row | None

    @property
    def ratio(self) -> float | None:
        """Same-process speedup over separate-process speedup, where both passed."""
        if self.separate is None or self.same is None or not (self.separate.speedup and self.same.speedup):
            return None
        return self.same.speedup / self.separate.speedup

    @property
    def speedup_over_eager_alone(self) -> float | None:
        """In the same process: eager timed on its own over the compiled median (a notebook's ratio)."""
        if self.same is None or not self.same.passed or not self.same.eager_alone_ms or not self.same.compiled_ms:
            return None
        return self.same.eager_alone_ms / self.same.compiled_ms

    @property
    def disagrees(self) -> bool:
        """True if the speedups differ by more than `MODES_DISAGREE`, or only one mode passed."""
        if self.separate is None or self.same is None:
            return False
        if self.separate.passed != self.same.passed:
            return True
        ratio = self.ratio
        return ratio is not None and abs(ratio - 1.0) > MODES_DISAGREE


def compare_modes(rows: Sequence[Row]) -> list[ModeComparison]:
    """A comparison per (model, task, compiler) that ran in either mode, in the rows' order."""
    by_key = {(row.process_mode, row.model, row.task, row.compiler): row for row in rows}
    keys = dict.fromkeys((row.model, row.task, row.compiler) for row in rows)
    return [
        ModeComparison(m, t, c, by_key.get(("separate", m, t, c)), by_key.get(("same", m, t, c))) for m, t, c in keys
    ]


def _eager_cell(row: Row | None) -> str:
    return _num(row.eager_ms, 3) if row is not None else "-"


def render_comparison(rows: Sequence[Row]) -> list[str]:
    """The comparison section (markdown lines): a row per model, task and compiler, and geomeans per compiler."""
    comparisons = compare_modes(rows)
    lines = [f"## Speedup over eager: separate processes vs the same process (! = differ by more than "
             f"{MODES_DISAGREE:.0%}, or pass in one mode only)", ""]
    lines += _table(
        ["model", "task", "compiler", "eager ms sep / same", "separate", "same", "same / separate",
         "same, vs eager alone", ""],
        [
            [c.model, c.task, c.compiler, f"{_eager_cell(c.separate)} / {_eager_cell(c.same)}",
             _speedup_cell(c.separate), _speedup_cell(c.same), _num(c.ratio, 2),
             _num(c.speedup_over_eager_alone, 2, "x"), "!" if c.disagrees else ""]
            for c in comparisons
        ],
    )
    lines += ["", "Geomean speedup over the rows both modes passed, and the rows flagged:", ""]
    summary = []
    for compiler in dict.fromkeys(c.compiler for c in comparisons):
        mine = [c for c in comparisons if c.compiler == compiler]
        both = [c for c in mine if c.ratio is not None and c.separate and c.same]
        summary.append([
            compiler, str(len(both)),
            _num(geomean(c.separate.speedup for c in both if c.separate and c.separate.speedup), 2, "x"),
            _num(geomean(c.same.speedup for c in both if c.same and c.same.speedup), 2, "x"),
            f"{sum(c.disagrees for c in mine)}/{len(mine)}",
        ])
    lines += _table(["compiler", "rows", "separate", "same", "flagged"], summary)
    lines += ["", "eager ms: eager's median timed alternately with that compiler; same, vs eager alone: eager timed "
              "on its own at its place in the same-process order, over the compiled median."]
    return lines


def render_report(rows: Sequence[Row], meta: dict[str, Any]) -> str:
    """The markdown report: one mode's tables, or for several the comparison then each mode's tables."""
    modes = list(dict.fromkeys(row.process_mode for row in rows)) or ["separate"]
    order = meta.get("config", {}).get("order", "eager-first")
    headings = {**HEADINGS, "same": f"{HEADINGS['same']}, {order}"}
    if len(modes) == 1:
        return render_markdown(rows, meta, "" if modes == ["separate"] else headings[modes[0]])
    title = f"# Kiln benchmark: {meta.get('device', '?')} ({meta.get('date', '')}), separate processes vs the same process"
    parts = ["\n".join([title, "", f"- command: `{meta.get('command', '')}`", "", *render_comparison(rows)]) + "\n"]
    for mode in modes:
        cache = {
            name: counts for name, counts in (meta.get("graph_cache") or {}).items()
            if name.endswith(f", {mode} process") or (mode == "separate" and not name.endswith(" process"))
        }
        mode_rows = [row for row in rows if row.process_mode == mode]
        parts.append(render_markdown(mode_rows, {**meta, "graph_cache": cache}, headings.get(mode, mode)))
    return "\n".join(parts)


def rows_for_plot(rows: Sequence[Row]) -> list[Row]:
    """`rows` for the speedup plot: with several modes, each compiler's bars are labelled with their mode."""
    if len({row.process_mode for row in rows}) <= 1:
        return list(rows)
    return [dataclasses.replace(row, compiler=f"{row.compiler} ({row.process_mode})") for row in rows]
