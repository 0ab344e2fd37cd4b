"""KILN_DEBUG output: per compiled graph, a folder of every stage's artifacts.

Layout (the run folder's path is printed once per process)::

    <debug_dir>/run_<date>_<pid>/
        <function>_graph<N>/
            fx_graph.py           the captured torch-level FX graph
            aten_forward.py       the functional ATen forward graph (aot_eager / inductor)
            aten_backward.py      the ATen backward graph, when training
            forward/ir.txt        the loop-level IR (inductor)
            forward/kernels/...   generated kernels
            forward/wrapper.py    the Python wrapper calling them
            timings.json          seconds per stage for this graph
"""

from __future__ import annotations

import datetime
import itertools
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

_RUN_FOLDERS: dict[Path, Path] = {}
_GRAPH_NUMBERS = itertools.count()


def _run_folder(root: Path) -> Path:
    """The run folder under `root` for this process, created (and announced) on first use."""
    if root not in _RUN_FOLDERS:
        stamp = datetime.datetime.now().strftime("%Y%m%d_%H%M%S")
        folder = root / f"run_{stamp}_{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        _RUN_FOLDERS[root] = folder
        print(f"[kiln] KILN_DEBUG: writing compiled graphs' artifacts to {folder}", file=sys.stderr)
    return _RUN_FOLDERS[root]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "graph"


@dataclass
class GraphArtifacts:
    """The debug folder of one compiled graph; each `write` adds a file to it.

    Attributes:
        folder: the folder (None: nothing is written to disk, e.g. for the compile report alone).
        timings: seconds per stage, also written as timings.json.
        files: when not None, every file's text is also kept here by its relative path (the compile
            report reads them).
    """

    folder: Path | None
    timings: dict[str, float] = field(default_factory=dict)
    files: dict[str, str] | None = None

    def write(self, relative: str, text: str) -> Path | None:
        """Write `text` to `relative` (a path inside this graph's folder) and return the file's path."""
        if self.files is not None:
            self.files[relative] = text
        if self.folder is None:
            return None
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def write_graph(self, relative: str, gm: torch.fx.GraphModule) -> Path | None:
        """Write an FX graph as readable Python code (with the tabular form as a comment)."""
        code = gm.print_readable(print_output=False) if hasattr(gm, "print_readable") else gm.code
        return self.write(relative, str(code))

    def add_timing(self, stage: str, seconds: float) -> None:
        """Record `seconds` for `stage` and rewrite timings.json."""
        self.timings[stage] = self.timings.get(stage, 0.0) + seconds
        self.write("timings.json", json.dumps(self.timings, indent=2, sort_keys=True))


def new_graph_artifacts(debug_root: Path, label: str) -> GraphArtifacts:
    """A fresh folder for one compiled graph of the function or module named `label`."""
    folder = _run_folder(debug_root) / f"{_safe(label)}_graph{next(_GRAPH_NUMBERS)}"
    folder.mkdir(parents=True, exist_ok=True)
    return GraphArtifacts(folder)
