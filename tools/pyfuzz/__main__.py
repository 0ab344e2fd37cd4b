"""`python -m tools.pyfuzz`: generated Python programs, eager against Kiln (docs/testing.md).

    python -m tools.pyfuzz --programs 200 --seed 0                  # capture only (backend "eager")
    python -m tools.pyfuzz --programs 100 --target inductor --out /tmp/pyfuzz
    python -m tools.pyfuzz show 17                                   # print the program of seed 17

Each failing program is written to the output folder as ``pyfuzz_<seed>.py`` (its source, then its
verdict as a comment); the exit status is 1 when any program failed.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings
from pathlib import Path

from tools.pyfuzz.check import check
from tools.pyfuzz.generator import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pyfuzz", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", nargs="?", default="run", choices=["run", "show"])
    parser.add_argument("operands", nargs="*", help="the seed for show")
    parser.add_argument("--programs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--target", default="eager", help="a frontend backend: eager (capture only), aot_eager, inductor")
    parser.add_argument("--max-statements", type=int, default=12)
    parser.add_argument("--max-minutes", type=float, default=0.0, help="stop starting programs after this long")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per call before it counts as a hang")
    parser.add_argument("--out", type=Path, default=Path("pyfuzz_found"))
    args = parser.parse_args(argv)
    if args.command == "show":
        print(generate(int(args.operands[0]), args.max_statements).source)
        return 0
    warnings.simplefilter("ignore")
    started = time.monotonic()
    kinds: collections.Counter[str] = collections.Counter()
    for seed in range(args.seed, args.seed + args.programs):
        if args.max_minutes and time.monotonic() - started > 60 * args.max_minutes:
            break
        program = generate(seed, args.max_statements)
        verdict = check(program, args.target, args.timeout)
        kinds[verdict.kind] += 1
        if verdict.ok or verdict.kind in ("skipped", "capture_only"):
            continue
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"pyfuzz_{seed}.py"
        note = "\n".join(f"# {line}" for line in f"{verdict.kind} ({args.target}) at {verdict.where}: {verdict.detail}".splitlines())
        path.write_text(program.source + "\n" + note + "\n")
        print(f"[pyfuzz] seed {seed}: {verdict.kind} at {verdict.where}: {verdict.detail[:300]} -> {path}", flush=True)
    total = sum(kinds.values())
    print(f"[pyfuzz] {total} programs on {args.target} in {time.monotonic() - started:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())), flush=True)
    return 0 if kinds.keys() <= {"ok", "skipped", "capture_only"} else 1


if __name__ == "__main__":
    sys.exit(main())
