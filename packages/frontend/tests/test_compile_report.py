"""The compile report (KILN_REPORT / frontend.report): what it records, and that it works in a browser.

The model has graph breaks (a print, a branch on a tensor's value) and recompiles (a new input
size under ``dynamic=False``). The browser test opens the file in headless Chromium (Debian's
``chromium`` package; skipped with the reason when it is not installed), asks the page to expand
every section, and checks that it loaded, expanded, and logged nothing to the console.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import frontend
from frontend.compile_report import PROCESS_REPORT, ProcessReport
from frontend.compile_report.highlight import highlight
from frontend.compile_report.html import render


class BreakingModel(nn.Module):
    """Two graph breaks per call; a new batch size recompiles."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.lin(x))
        print("between graphs")
        if y.sum() > 0:
            y = y * 2
        return y.sin()


@pytest.fixture
def recorded(tmp_path: Path, fresh_cache: None, capsys: pytest.CaptureFixture[str]) -> str:
    """The HTML report of compiling and running `BreakingModel` on two batch sizes."""
    saved = (PROCESS_REPORT.active, PROCESS_REPORT.path, PROCESS_REPORT.functions)
    PROCESS_REPORT.functions = {}
    path = tmp_path / "report.html"
    try:
        with frontend.config.patch(graph_cache=False):  # compile every graph: a cached one has no kernels to list
            frontend.report(path)
            model = BreakingModel()
            compiled = frontend.compile(model, dynamic=False)
            for rows in (3, 4):
                x = torch.randn(rows, 6)
                torch.testing.assert_close(compiled(x), model(x))
            frontend.report(path)
        capsys.readouterr()
        return path.read_text()
    finally:
        PROCESS_REPORT.active, PROCESS_REPORT.path, PROCESS_REPORT.functions = saved


def test_report_records_breaks_recompiles_guards_and_stages(recorded: str) -> None:
    text = html.unescape(re.sub(r"<[^>]+>", "", recorded))
    assert "BreakingModel: " in text and "graph break(s)" in text
    assert "print() writes to the console" in text
    assert 'print("between graphs")' in text  # the user's source line of the break
    assert "if y.sum() > 0:" in text
    assert "recompiling" in text and "TENSOR_MATCH" in text  # the failing guard
    for stage_file in ("fx_graph.py", "aten_forward.py", "forward/ir.txt", "forward/wrapper.py"):
        assert stage_file in text, stage_file
    assert re.search(r"forward/kernel_\w+\.txt", text)
    assert re.search(r"graph 1: [1-9]\d* kernel\(s\)", text)
    assert "lowering" in text and "seconds" in text
    assert '<span class="k">def</span>' in recorded  # highlighted code
    assert "http://" not in recorded and "https://" not in recorded  # self-contained


def test_highlight_escapes_and_marks_tokens() -> None:
    python = highlight("def f(x):  # <b>\n    return x + 1.5 if 'a<b' else None", "python")
    assert '<span class="k">def</span>' in python and '<span class="c"># &lt;b&gt;</span>' in python
    assert '<span class="s">&#x27;a&lt;b&#x27;</span>' in python and '<span class="n">1.5</span>' in python
    cpp = highlight('#include <omp.h>\nextern "C" void k(float* x) { // loop\n for (int i = 0; i < 4; i++) {} }', "cpp")
    assert '<span class="k">#include</span>' in cpp and '<span class="c">// loop</span>' in cpp
    assert '<span class="k">for</span>' in cpp and "&lt;omp.h&gt;" in cpp


def test_empty_report_renders() -> None:
    assert "nothing was compiled" in render(ProcessReport())


def test_kiln_report_environment_writes_at_exit(tmp_path: Path) -> None:
    path = tmp_path / "env-report.html"
    code = "import torch, frontend\nf = frontend.compile(lambda x: torch.cos(x) + 1)\nf(torch.randn(5))\n"
    env = dict(os.environ, KILN_REPORT=str(path), KILN_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"compile report: {path}" in done.stderr
    assert "aten_forward.py" in path.read_text()


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install -y chromium); .ci/run installs it")
def test_report_loads_and_expands_in_headless_chromium(recorded: str, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text(recorded)
    command = [
        str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom", f"{page.as_uri()}#expand-all",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    body = re.search(r"<body([^>]*)>", dom)
    assert body is not None, dom[:500]
    assert 'data-ready="yes"' in body.group(1), "the page's script did not run"
    assert 'data-toggled="true"' in body.group(1), "clicking a section's summary did not open it"
    assert "data-errors" not in body.group(1), body.group(1)
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
    expanded = re.search(r'data-expanded="(\d+)"', body.group(1))
    assert expanded is not None
    total = len(re.findall(r"<details[\s>]", dom))
    assert int(expanded.group(1)) == total > 10
    assert len(re.findall(r"<details[^>]*\sopen", dom)) == total  # every section is open
