"""`python -m tools.fuzz`: the differential fuzzer's command line (see docs/testing.md).

    python -m tools.fuzz --programs 500 --seed 0                 # C++ kernels
    python -m tools.fuzz --programs 200 --targets triton         # Triton kernels, interpreted
    python -m tools.fuzz --programs 200 --targets cuda           # Triton kernels on a GPU, against eager on the GPU
    python -m tools.fuzz --programs 50 --no-shrink --out /tmp/f  # quick look, nothing shrunk
    python -m tools.fuzz show 1234                               # print the program of seed 1234
    python -m tools.fuzz check 1234 --target cpp                 # run one seed in this process
    python -m tools.fuzz summarize tools/fuzz/found               # the findings of runs, as a table
    python -m tools.fuzz recheck tools/fuzz/found                 # which findings still fail today
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from tools.fuzz.generator import RULES, GenConfig


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.fuzz", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="run", choices=["run", "show", "check", "summarize", "recheck"],
                        help="run (default), show a seed's program, check a seed in-process, summarize findings, "
                        "run recorded findings again")
    parser.add_argument("operands", nargs="*", help="the seed for show/check; output folders for summarize/recheck")
    parser.add_argument("--programs", type=int, default=100, help="programs per target (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="first seed (default 0)")
    parser.add_argument("--targets", default="cpp", help="comma-separated: cpp, triton, cuda (default cpp)")
    parser.add_argument("--target", default="cpp", help="the target of `check`")
    parser.add_argument("--out", type=Path, default=Path("tools/fuzz/found"), help="output folder (default tools/fuzz/found)")
    parser.add_argument("--findings-md", type=Path, default=None, help="also append each new finding to this Markdown file")
    parser.add_argument("--no-shrink", action="store_true", help="report failures as generated")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per program before it counts as a hang")
    parser.add_argument("--shrink-calls", type=int, default=120, help="program runs per shrink (default 120)")
    parser.add_argument("--max-minutes", type=float, default=0.0, help="stop starting programs after this long")
    parser.add_argument("--max-stmts", type=int, default=10, help="longest program, in statements (default 10)")
    parser.add_argument("--rules", default=",".join(RULES), help=f"grammar rules to draw from (default all: {','.join(RULES)})")
    parser.add_argument("--autocast", type=float, default=0.15,
                        help="share of programs run under bfloat16 autocast (default 0.15)")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the workers (default 10)")
    parser.add_argument("--kiln-src", type=Path, default=None,
                        help="a Kiln tree (e.g. `git archive HEAD` unpacked) whose packages the workers import instead of the installed ones")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (1 when a run found a failure)."""
    args = _parser().parse_args(argv)
    rules = tuple(r for r in args.rules.split(",") if r)
    unknown = sorted(set(rules) - set(RULES))
    if unknown:
        print(f"unknown rules {unknown}; known: {', '.join(RULES)}", file=sys.stderr)
        return 2
    gen = GenConfig(max_stmts=args.max_stmts, rules=rules, autocast_weight=args.autocast)
    if args.command == "summarize":
        from tools.fuzz.report import summarize
        from tools.fuzz.runner import load_findings

        print(summarize(load_findings([Path(folder) for folder in args.operands or [str(args.out)]])))
        return 0
    if args.command == "recheck":
        from tools.fuzz.runner import recheck

        results = recheck([Path(f) for f in args.operands or [str(args.out)]], args.kiln_src, args.nice, args.timeout)
        fixed = sum(r["now"] == "ok" for r in results)
        print(f"{fixed} of {len(results)} findings pass now")
        return 0 if fixed == len(results) else 1
    if args.command in ("show", "check"):
        from tools.fuzz.generator import generate
        from tools.fuzz.program import render_body

        seed = int(args.operands[0]) if args.operands else args.seed
        program = generate(seed, gen)
        print(render_body(program))
        if args.command == "check":
            from tools.fuzz.execute import check

            verdict = check(program, args.target)
            print(f"{verdict.kind} {verdict.where}\n{verdict.detail}")
            return 0 if verdict.ok else 1
        return 0
    from tools.fuzz.runner import Fuzzer, RunConfig

    targets = tuple(t for t in args.targets.split(",") if t)
    config = RunConfig(
        programs=args.programs, seed=args.seed, targets=targets, out_dir=args.out, findings_md=args.findings_md,
        shrink=not args.no_shrink, timeout=args.timeout, shrink_calls=args.shrink_calls,
        max_minutes=args.max_minutes, nice=args.nice, kiln_src=args.kiln_src, gen=gen,
    )
    # A background run (where SIGINT is ignored) stops cleanly on SIGTERM: workers closed, summary written.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    summary = Fuzzer(config).run()
    print(json.dumps(summary, indent=2))
    failed = any(t["failures"] for t in summary["targets"].values())
    return 1 if failed else 0
