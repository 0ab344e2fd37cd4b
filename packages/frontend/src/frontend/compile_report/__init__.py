"""The compile report: one self-contained HTML file of everything this process compiled.

``KILN_REPORT=path.html`` (``config.report``) or `report` turn it on; it lists every captured
frame, graph breaks with the user's lines, guards and recompilations with the failing guard, each
graph's stages (FX, ATen forward/backward, IR, kernels, wrapper), seconds per stage, cache hits,
kernel counts and fallbacks.
"""

from __future__ import annotations

from pathlib import Path

from frontend.compile_report.record import PROCESS_REPORT, FunctionEntry, GraphEntry, ProcessReport

__all__ = ["PROCESS_REPORT", "FunctionEntry", "GraphEntry", "ProcessReport", "report"]


def report(path: str | Path) -> Path:
    """Record every compile of this process into the HTML file `path`, and write what is recorded so far.

    Call it before compiling to start recording (compiles made before are not in it); the file is
    written now, again at process exit, and whenever `report` is called again.

    Example::

        frontend.report("compile.html")
        compiled = frontend.compile(model)
        compiled(x)
        frontend.report("compile.html")   # or let the process exit
    """
    PROCESS_REPORT.activate(path)
    return PROCESS_REPORT.write(path)
