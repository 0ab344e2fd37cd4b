"""Kiln's benchmark harness: eager vs torch.compile vs Kiln, side by side, with a table, JSON and a plot.

Run it as `python -m tools.bench` (or `nox -s bench -- ARGS`); docs/benchmarks.md says how.
The pieces: `config` (what to run), `registry`/`suite` (the models), `worker` (one subprocess per
model, compiler and phase), `timing`/`stats`/`accuracy` (measuring right), `runner` (the processes),
`report`/`plot` (the output). The standalone scripts beside them (capture_overhead.py,
aotgrad_memory.py, cpp_kernels.py) belong to their packages' engineers.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness with command-line arguments `argv` (default: sys.argv); see `python -m tools.bench --help`."""
    # imported late, so that `python -m tools.bench.worker` does not import the worker twice
    from tools.bench.cli import main as cli_main

    return cli_main(argv)
