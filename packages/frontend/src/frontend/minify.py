"""``python -m frontend.minify repro.py``: rerun a Kiln repro script and shrink its graph further.

The script (written under KILN_REPRO_AFTER / KILN_REPRO_LEVEL=accuracy) is loaded without running
its main block; its graph is shrunk by delta debugging to the fewest operations that still fail the
same way (the same exception type, or a result that still differs from eager), and the result is
written as a new repro script beside it (or to ``--output``).
"""

from __future__ import annotations

import argparse
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path

from frontend.repro.inputs import DEFAULT_SAVED_BYTES
from frontend.repro.minifier import failure_of, minify
from frontend.repro.script import ReproSpec, render_script
from frontend.repro.shrink import operations
from frontend.repro.stages import as_graph_module


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m frontend.minify", description=__doc__.split("\n\n")[0])
    parser.add_argument("script", type=Path, help="a repro script Kiln wrote")
    parser.add_argument("-o", "--output", type=Path, help="where to write the minified script (default: <script>_min.py)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the minifier on a repro script; returns the process exit status (0: a smaller script written)."""
    args = _parser().parse_args(argv)
    namespace = runpy.run_path(str(args.script), run_name="kiln_repro")
    try:
        model, inputs, described = namespace["Repro"](), namespace["make_inputs"](), namespace["KILN_REPRO"]
    except KeyError as missing:
        print(f"{args.script} is not a Kiln repro script (it defines no {missing})", file=sys.stderr)
        return 2
    spec = ReproSpec(**described)
    gm = as_graph_module(model)
    try:
        shrunk = minify(gm, inputs, spec)
    except ValueError as error:
        print(f"{args.script}: {error} (it may have been fixed, or depend on something outside the graph)", file=sys.stderr)
        return 1
    seen = failure_of(shrunk.graph_module, shrunk.inputs, spec) or ""
    text = render_script(shrunk.graph_module, shrunk.inputs, ReproSpec(spec.after, spec.backend, spec.kind, spec.options, seen), DEFAULT_SAVED_BYTES)
    output = args.output or args.script.with_name(f"{args.script.stem}_min.py")
    output.write_text(text)
    before, after = len(operations(gm)), len(operations(shrunk.graph_module))
    print(f"[kiln] minified {before} -> {after} ops ({shrunk.tries} candidates tried): {output}")
    print(f"[kiln] it fails with: {seen}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
