"""`python -m tools.zoo`: real architectures through Kiln's capture, next to TorchDynamo (docs/zoo.md).

    python -m tools.zoo                          # every model, Kiln and Dynamo, 2 workers
    python -m tools.zoo --models llama,bert,t5   # a few
    python -m tools.zoo --slice --no-dynamo      # the CI slice, capture only
    python -m tools.zoo --default-backend        # also a dozen through Kiln's C++ kernels
    python -m tools.zoo --list                   # the models and their input kinds
    python -m tools.zoo --task train --autocast bf16 --models llama,bert   # training steps under bf16 autocast
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

from tools.zoo.models import DEFAULT_BACKEND_MODELS, SLICE, all_specs
from tools.zoo.modes import AUTOCASTS, TASKS, Mode
from tools.zoo.report import default_backend_failures, mode_summary, mode_table, summary, table
from tools.zoo.verdicts import (
    EXPECTATIONS,
    expectation_of,
    kiln_problems,
    load_expectations,
    load_known_gaps,
    mode_problems,
)

COMPILERS = ("kiln", "kiln-aot", "kiln-default", "dynamo")
"""kiln: capture only; kiln-aot: + aotgrad (aot_eager); kiln-default: + C++ kernels (inductor); dynamo: the reference."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tools.zoo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="", help="comma-separated zoo names (default: all)")
    parser.add_argument("--family", default="", help="only this family: decoder, encoder, encoder-decoder, vision, audio, multimodal")
    parser.add_argument("--slice", action="store_true", help="only the CI slice (tests/test_zoo_slice.py)")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--no-dynamo", action="store_true", help="Kiln only, no TorchDynamo reference")
    parser.add_argument("--default-backend", action="store_true",
                        help=f"also compile {len(DEFAULT_BACKEND_MODELS)} models with frontend.compile(model) (C++ kernels)")
    parser.add_argument("--task", choices=TASKS, default="infer",
                        help="infer: 4 calls under no_grad (default); train: 3 steps, outputs, loss and every gradient")
    parser.add_argument("--autocast", choices=[a for a in AUTOCASTS if a], default="",
                        help="run every call under torch.autocast('cpu', dtype=torch.bfloat16)")
    parser.add_argument("--compilers", default="",
                        help=f"comma-separated, of {', '.join(COMPILERS)} (default: kiln,dynamo; kiln-aot for "
                             "--task train / --autocast; --default-backend adds kiln-default on a dozen)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per model before it counts as hung")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the workers (default 10)")
    parser.add_argument("--json", type=Path, default=Path("zoo_results.json"), help="results file (default zoo_results.json)")
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table and summary as Markdown")
    parser.add_argument("--record-expectations", action="store_true",
                        help=f"store this run's Kiln graph/break counts as the expectations ({EXPECTATIONS.name})")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="run nothing: report (and --record-expectations, --check) on a saved results file")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on a storm, wrong result, error or regression that no known gap excuses")
    return parser


def _selected(args: argparse.Namespace) -> list[str]:
    specs = all_specs()
    names = [s.name for s in specs]
    if args.models:
        wanted = [n.strip() for n in args.models.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise SystemExit(f"unknown models {unknown}; `python -m tools.zoo --list` lists them")
        names = wanted
    if args.slice:
        names = [n for n in names if n in SLICE]
    if args.family:
        families = {s.name: s.family for s in specs}
        names = [n for n in names if families[n] == args.family]
    return names


def _progress(result: dict[str, Any]) -> None:
    def part(key: str) -> str:
        data = result.get(key)
        if data is None:
            return ""
        wrong = any(not c["correct"] and not c.get("error") for c in data.get("calls", []))
        if data.get("error"):
            return f"{key}: {'WRONG then ' if wrong else ''}error"
        return (f"{key}: {data['first_call_graphs']}g/{data['first_call_breaks']}b "
                f"{'storm ' if data['storm'] else ''}{'ok' if data['correct'] else 'WRONG'}")

    text = result.get("error", "").splitlines()[0][:100] if result.get("error") else "  ".join(
        p for p in (part(c) for c in COMPILERS) if p)
    print(f"  {result['model']:28s} {result.get('seconds', 0):6.1f}s  {text}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.list:
        for spec in all_specs():
            print(f"{spec.name:32s} {spec.family:16s} {spec.inputs:18s} {spec.source}")
        return 0
    mode = Mode(args.task, args.autocast)
    if args.from_json is not None:
        saved = json.loads(args.from_json.read_text())
        mode = Mode.from_json(saved["meta"].get("mode"))
        print(f"{saved['meta']['header']}\n\n{_render(saved['results'], mode)}\n")
        return _finish(args, saved["results"], mode)
    names = _selected(args)
    if args.compilers:
        base = [c.strip() for c in args.compilers.split(",") if c.strip()]
        unknown = sorted(set(base) - set(COMPILERS))
        if unknown:
            raise SystemExit(f"unknown compilers {unknown}; choose from {', '.join(COMPILERS)}")
    elif mode.default:
        base = ["kiln"] if args.no_dynamo else ["kiln", "dynamo"]
    else:
        base = ["kiln-aot"]

    def compilers(name: str) -> list[str]:
        extra = args.default_backend and name in DEFAULT_BACKEND_MODELS and "kiln-default" not in base
        return base + (["kiln-default"] if extra else [])

    from tools.zoo.pool import run_pool

    print(f"zoo: {len(names)} models, mode {mode.label}, {args.jobs} workers, compilers {base}"
          + (" (+ default backend on a dozen)" if args.default_backend else ""), flush=True)
    started = time.perf_counter()
    partial = args.json.with_suffix(".partial.jsonl")  # each result as it arrives, in case the run is cut short
    partial.write_text("")

    def on_result(result: dict[str, Any]) -> None:
        _progress(result)
        with partial.open("a") as stream:
            stream.write(json.dumps(result) + "\n")

    results = run_pool(names, compilers, args.jobs, args.timeout, on_result, nice=args.nice,
                       mode=None if mode.default else mode.to_json())
    elapsed = time.perf_counter() - started
    import torch
    import transformers

    header = (f"Measured {date.today().isoformat()} on {_cpu()} (Python {platform.python_version()}, torch "
              f"{torch.__version__}, transformers {transformers.__version__}), {elapsed / 60:.1f} min, "
              "command: python -m tools.zoo "
              + " ".join(argv if argv is not None else sys.argv[1:]))
    payload = {"meta": {**_meta(header), "mode": mode.to_json()}, "results": results}
    args.json.write_text(json.dumps(payload, indent=1))
    text = f"{header}\n\n{_render(results, mode)}\n"
    print("\n" + text)
    print(f"wrote {args.json}")
    if args.markdown:
        args.markdown.write_text(text)
    return _finish(args, results, mode)


def _ran_compilers(results: list[dict[str, Any]]) -> list[str]:
    return [c for c in COMPILERS if any(c in r for r in results)]


def _render(results: list[dict[str, Any]], mode: Mode) -> str:
    """The table and summary: Kiln next to Dynamo in the default mode, one column per compiler otherwise."""
    if mode.default:
        return f"{table(results)}\n\n{summary(results)}"
    compilers = _ran_compilers(results)
    return f"Mode: {mode.label}\n\n{mode_table(results, compilers)}\n\n{mode_summary(results, compilers)}"


def _finish(args: argparse.Namespace, results: list[dict[str, Any]], mode: Mode) -> int:
    if not mode.default:
        if args.record_expectations:
            raise SystemExit("--record-expectations records the default mode's graph counts only")
        gaps = load_known_gaps()
        bad = [f"{r['model']} [{kind}]: {text}" for r in results for kind, text in mode_problems(r, _ran_compilers(results))
               if kind not in gaps.get(r["model"], {}).get("kinds", [])]
        for line in bad:
            print(f"unexcused: {line[:400]}")
        return 1 if args.check and bad else 0
    if args.record_expectations:
        _record(results)
    failures = default_backend_failures(results)
    for line in failures:
        print(f"default backend: {line}")
    if args.check:
        return 1 if _unexcused(results) or failures else 0
    return 0


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return f"{platform.machine()} x{os.cpu_count()}"


def _meta(header: str) -> dict[str, Any]:
    import torch
    import transformers

    return {"header": header, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "machine": platform.machine()}


def _record(results: list[dict[str, Any]]) -> None:
    recorded = {"models": load_expectations()}
    for result in results:
        counts = expectation_of(result)
        if counts is not None:
            recorded["models"][result["model"]] = counts
    recorded["models"] = dict(sorted(recorded["models"].items()))
    EXPECTATIONS.write_text(json.dumps(recorded, indent=1) + "\n")
    print(f"recorded expectations of {len(results)} models in {EXPECTATIONS}")


def _unexcused(results: list[dict[str, Any]]) -> list[str]:
    gaps = load_known_gaps()
    expected = load_expectations()
    bad = []
    for result in results:
        excused = set(gaps.get(result["model"], {}).get("kinds", []))
        for kind, text in kiln_problems(result, expected.get(result["model"])):
            if kind not in excused:
                bad.append(f"{result['model']} [{kind}]: {text}")
    for line in bad:
        print(f"unexcused: {line}")
    return bad
