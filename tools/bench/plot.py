"""The run's picture: speedup over eager per model and task, the compilers side by side (matplotlib).

Failed rows are drawn as an empty, hatched slot marked "fail" at 0, so a failure never looks fast.
Without matplotlib no PNG is written; `python -m tools.bench --from-json RUN.json` redraws it later
on a machine that has it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from tools.bench.report import Row


def matplotlib_available() -> bool:
    """Whether matplotlib can be imported here."""
    return importlib.util.find_spec("matplotlib") is not None


def plot_speedups(rows: Sequence[Row], path: Path, title: str) -> bool:
    """Write a grouped bar chart of speedups to `path`; False (nothing written) without matplotlib."""
    if not matplotlib_available():
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    compilers = list(dict.fromkeys(row.compiler for row in rows))
    keys = list(dict.fromkeys((row.model, row.task) for row in rows))
    by_key = {(row.model, row.task, row.compiler): row for row in rows}
    width = 0.8 / max(len(compilers), 1)
    figure, axes = plt.subplots(figsize=(max(8.0, 0.9 * len(keys) + 2), 5.0))
    for index, compiler in enumerate(compilers):
        offsets = [k + (index - (len(compilers) - 1) / 2) * width for k in range(len(keys))]
        heights, failed = [], []
        for key_index, (model, task) in enumerate(keys):
            row = by_key.get((model, task, compiler))
            if row is not None and row.passed and row.speedup is not None:
                heights.append(row.speedup)
            else:
                heights.append(0.0)  # not run: an empty slot
                if row is not None:
                    failed.append((offsets[key_index], "skip" if row.status == "skipped" else "fail"))
        bars = axes.bar(offsets, heights, width, label=compiler)
        color = bars.patches[0].get_facecolor() if bars.patches else None
        for x, word in failed:
            axes.bar([x], [0.15], width, color="none", edgecolor=color, hatch="xx")
            axes.text(x, 0.17, word, ha="center", va="bottom", fontsize=7, rotation=90, color=color)
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    axes.set_xticks(range(len(keys)))
    axes.set_xticklabels([f"{model}\n{task[:5]}" for model, task in keys], rotation=45, ha="right", fontsize=8)
    axes.set_ylabel("speedup over eager (higher is better)")
    axes.set_title(title)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True
