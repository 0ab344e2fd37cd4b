"""Repro scripts and the minifier: when a graph fails to compile, crashes or computes wrong values.

``KILN_REPRO_AFTER=capture|aotgrad`` (``config.repro_after``) writes a standalone script rebuilding a
failing graph and calling the stage that failed; ``KILN_REPRO_LEVEL=accuracy`` also checks each
compiled graph against eager once and writes a minified script of a mismatch. A script runs with
``python script.py`` (through `run_repro`) and shrinks with ``python -m frontend.minify script.py``.
"""

from frontend.repro.accuracy import Mismatch, compare
from frontend.repro.minifier import failure_of, minify
from frontend.repro.recorder import ReproRecorder, resolved_repro_after
from frontend.repro.script import ReproSpec, render_script
from frontend.repro.shrink import Shrunk, shrink
from frontend.repro.stages import ReproducedMismatch, compile_stage, run_repro

__all__ = [
    "Mismatch",
    "ReproRecorder",
    "ReproSpec",
    "ReproducedMismatch",
    "Shrunk",
    "compare",
    "compile_stage",
    "failure_of",
    "minify",
    "render_script",
    "resolved_repro_after",
    "run_repro",
    "shrink",
]
