"""`nox -s demo` on two rows: the columns it promises, and a training step with no graph break.

Runs tools/demo.py in its own process (it configures logging for the whole process) with
``--strict``, so a row that fails or differs from eager fails the test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_demo_reports_kernels_fusions_and_next_steps(tmp_path: Path) -> None:
    # A cache folder of its own: a warm one (graphs compiled by an earlier run) shows 0 kernels compiled.
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "demo.py"), "--quick", "--strict", "--device", "cpu",
         "--row", "function: sin+cos", "--row", "resnet-style: training step"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**os.environ, "KILN_CACHE_DIR": str(tmp_path)},
    )
    output = done.stdout
    assert done.returncode == 0, output + done.stderr[-3000:]
    header = next(line for line in output.splitlines() if line.startswith("program"))
    assert header.split()[3:8] == ["status", "graphs", "breaks", "kernels", "compile"], header
    rows = {line[:38].strip(): line[38:].split() for line in output.splitlines() if line.startswith(("function", "resnet"))}
    # device, mode, status, graphs, breaks, kernels, compile s, eager ms, kiln ms, speedup, rel err
    function, training = rows["function: sin+cos"], rows["resnet-style: training step"]
    assert function[2:6] == ["ok", "1", "0", "1"], function
    assert training[2:5] == ["ok", "1", "0"] and int(training[5]) > 10, training  # loss.backward() is no break
    assert "largest fusions: cpp_fused_sin_cos_add_0 (3 ops)" in output
    fusions = re.findall(r"largest fusions: (.*)", output)[1].split(", ")
    assert len(fusions) == 3, fusions
    assert "-> graph break" not in output
    for hint in ("Where to look next:", "KILN_DEBUG=1", "KILN_LOGS=", "nox -s bench"):
        assert hint in output
