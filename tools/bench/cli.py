"""`python -m tools.bench`: parse the command line, run the suite, write the table, JSON and plot."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.bench.compare import render_report, rows_for_plot
from tools.bench.config import (
    ORDERS,
    PROCESS_MODES,
    TASKS,
    BenchConfig,
    MeasureConfig,
    parse_compilers,
    parse_tasks,
)
from tools.bench.plot import plot_speedups
from tools.bench.registry import MODELS
from tools.bench.report import (
    graph_cache_counts,
    jsonable,
    merge_rows,
    report_json,
    rows_from_json,
)
from tools.bench.results import JobResult
from tools.bench.runner import REPO_ROOT, run_suite
from tools.bench.suite import select_models
from tools.bench.sweep import parse_threads, render_sweep


def build_parser() -> argparse.ArgumentParser:
    """The harness's command-line options."""
    parser = argparse.ArgumentParser(
        prog="python -m tools.bench",
        description="eager vs torch.compile vs Kiln: speedup, compile time, memory and accuracy, one process per model "
        "and compiler (or, with --process-mode same, one per model running them in turn).",
    )
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--models", default="", help="comma-separated model or family names (default: the whole suite)")
    parser.add_argument("--modes", default=",".join(TASKS), help="inference,training (aliases: infer, train)")
    parser.add_argument(
        "--compilers", default="all",
        help="torch.compile, kiln, and on cuda torch.compile-ro, kiln-ro (reduce-overhead); 'eager' adds an "
        "eager-vs-eager calibration row; default: all",
    )
    parser.add_argument(
        "--process-mode", choices=(*PROCESS_MODES, "both"), default="separate",
        help="separate: a fresh process per model and compiler (default); same: one process per model runs eager, "
        "torch.compile, then Kiln, as a user's script or notebook does; both: run both and add a table comparing "
        "their speedups (rows differing by more than 10%% are flagged)",
    )
    parser.add_argument(
        "--order", choices=ORDERS, default="eager-first",
        help="same-process order: eager-first (eager timed alone, torch.compile, Kiln; default) or kiln-first "
        "(Kiln, torch.compile, eager timed alone), to expose order effects",
    )
    parser.add_argument("--quick", action="store_true", help="the short subset with short measurements (3 models on CPU, 4 on CUDA), no warm phase")
    parser.add_argument(
        "--warm", action=argparse.BooleanOptionalAction, default=None,
        help="also compile in a second process with populated caches (default: on; off with --quick)",
    )
    parser.add_argument(
        "--threads", default="2",
        help="CPU threads (torch.set_num_threads, OMP_NUM_THREADS); several (1,4,8,16) run the suite once per "
        "count (with --process-mode same: each model's one worker runs every count in turn) and add a sweep table",
    )
    parser.add_argument("--timeout", type=float, default=None, help="seconds per process (default: 1200, quick: 300)")
    parser.add_argument("--min-time", type=float, default=None, help="seconds of timed calls per side per model")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "bench_results")
    parser.add_argument(
        "--from-json", type=Path, nargs="+", default=None,
        help="re-render the table and plot from earlier runs' JSON files (several are merged into one report)",
    )
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    return parser


def _default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def config_from_args(args: argparse.Namespace) -> BenchConfig:
    """A `BenchConfig` from parsed arguments (the first of several thread counts); raises ValueError
    for an unknown name."""
    device = args.device or _default_device()
    measure = MeasureConfig.quick() if args.quick else MeasureConfig()
    if args.min_time is not None:
        measure = MeasureConfig(**{**measure.__dict__, "min_time_s": args.min_time})
    return BenchConfig(
        device=device,
        models=tuple(name.strip() for name in args.models.split(",") if name.strip()),
        tasks=parse_tasks(args.modes),
        compilers=parse_compilers(args.compilers, device),
        quick=args.quick,
        warm=args.warm if args.warm is not None else not args.quick,
        threads=parse_threads(args.threads)[0],
        timeout_s=args.timeout or (300.0 if args.quick else 1200.0),
        output_dir=args.output_dir,
        measure=measure,
        process_mode="same" if args.process_mode == "same" else "separate",
        order=args.order,
    )


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers and their compile subprocesses
    return usage.ru_utime + usage.ru_stime


def _load_average() -> str:
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except OSError:
        return "?"


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def merge_documents(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """One report from several runs' JSON documents (e.g. a GPU suite split into runs under 10 minutes).

    Rows are re-merged from all jobs, so a model run in two documents keeps the later one's rows.
    """
    if len(documents) == 1:
        return documents[0]
    jobs = [JobResult.from_json(job) for document in documents for job in document["jobs"]]
    meta = dict(documents[0]["meta"])
    meta["command"] = " ; ".join(document["meta"].get("command", "") for document in documents)
    meta["merged_from"] = len(documents)
    meta["graph_cache"] = graph_cache_counts(jobs)
    return report_json(merge_rows(jobs), jobs, meta)


def write_outputs(document: dict[str, Any], output_dir: Path, stem: str) -> tuple[Path, Path, Path | None]:
    """Write STEM.json, STEM.md and (with matplotlib) STEM.png into `output_dir`; their paths."""
    output_dir.mkdir(parents=True, exist_ok=True)
    rows = rows_from_json(document)
    json_path, md_path, png_path = (output_dir / f"{stem}.{ext}" for ext in ("json", "md", "png"))
    json_path.write_text(json.dumps(jsonable(document), indent=1))
    md_path.write_text(render_report(rows, document["meta"]))
    meta = document["meta"]
    try:
        drawn = plot_speedups(rows_for_plot(rows), png_path, f"Kiln benchmark, {meta.get('device')}: speedup over eager")
    except Exception as error:  # the table and JSON are written already; a plotting problem must not lose them
        print(f"no plot: {type(error).__name__}: {error}", file=sys.stderr)
        drawn = False
    return json_path, md_path, png_path if drawn else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness; exit 0 when it produced a report (failed rows are results, not errors), 2 on bad usage."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        for spec in MODELS.values():
            quick = f" (quick on {', '.join(spec.quick_on)})" if spec.quick_on else ""
            print(f"{spec.name:<18} {spec.family:<14} {','.join(spec.devices):<9} {spec.description}{quick}")
        return 0
    if args.from_json:
        document = merge_documents([json.loads(path.read_text()) for path in args.from_json])
        stem = args.from_json[0].stem + ("-merged" if len(args.from_json) > 1 else "")
        paths = write_outputs(document, args.output_dir, stem)
        print(render_report(rows_from_json(document), document["meta"]))
        _print_paths(paths)
        return 0
    try:
        config = config_from_args(args)
        models = select_models(config.device, config.models, config.quick)
        thread_counts = parse_threads(args.threads)
    except ValueError as error:
        parser.error(str(error))
    command = shlex.join(["python", "-m", "tools.bench", *(argv if argv is not None else sys.argv[1:])])
    modes = PROCESS_MODES if args.process_mode == "both" else (config.process_mode,)
    if len(thread_counts) == 1:
        run_once(config, models, command, modes)
        return 0
    if config.device != "cpu":
        parser.error("--threads with several counts is a CPU sweep: add --device cpu")
    if len(modes) > 1:
        parser.error("--threads with several counts sweeps one process mode: use --process-mode separate or same")
    if config.process_mode == "same":
        documents = run_sweep_in_process(config.replace(sweep_threads=thread_counts), models, command)
    else:
        documents = [(threads, run_once(config.replace(threads=threads), models, command)) for threads in thread_counts]
    sweep = render_sweep(documents, command)
    path = config.output_dir / f"sweep-cpu-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.md"
    path.write_text(sweep)
    print(sweep)
    print(f"wrote {path}")
    return 0


def run_once(
    config: BenchConfig, models: Sequence[Any], command: str, modes: Sequence[str] | None = None
) -> dict[str, Any]:
    """One run of the suite under `config` in each process mode of `modes` (default: `config.process_mode`),
    in that order: print and write its report; the report document."""
    modes = modes or (config.process_mode,)
    mode_tag = "" if list(modes) == ["separate"] else f"-{'both' if len(modes) > 1 else modes[0]}"
    stem = f"bench-{config.device}-t{config.threads}{mode_tag}-{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    run = _Run.start()
    jobs = [
        job for mode in modes
        for job in run_suite(config.replace(process_mode=mode), list(models), config.output_dir / f"{stem}-logs")
    ]
    return _write_report(jobs, config, models, command, modes, stem, run)


def run_sweep_in_process(config: BenchConfig, models: Sequence[Any], command: str) -> list[tuple[int, dict[str, Any]]]:
    """A same-process CPU sweep: one worker per model runs every compiler at each of `config.sweep_threads`
    (see `tools.bench.same_process`); one report per thread count, as `run_once` writes it."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run = _Run.start()
    jobs = run_suite(config, list(models), config.output_dir / f"bench-cpu-sweep-same-{stamp}-logs")
    return [
        (
            threads,
            _write_report(
                [job for job in jobs if job.threads == threads], config.replace(threads=threads, sweep_threads=()),
                models, command, ("same",), f"bench-cpu-t{threads}-same-{stamp}", run,
            ),
        )
        for threads in config.sweep_threads
    ]


@dataclass(frozen=True)
class _Run:
    """When a run started, and the machine's load and the workers' CPU seconds then."""

    started: datetime.datetime
    load_before: str
    cpu_before: float

    @staticmethod
    def start() -> _Run:
        return _Run(datetime.datetime.now(datetime.UTC), _load_average(), _children_cpu_s())


def _write_report(
    jobs: list[JobResult],
    config: BenchConfig,
    models: Sequence[Any],
    command: str,
    modes: Sequence[str],
    stem: str,
    run: _Run,
) -> dict[str, Any]:
    """Print and write the report of `jobs`; the report document."""
    environment = next((job.environment for job in jobs if job.environment), {})
    meta = {
        "device": config.device,
        "date": run.started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "wall_s": round((datetime.datetime.now(datetime.UTC) - run.started).total_seconds(), 1),
        "worker_cpu_s": round(_children_cpu_s() - run.cpu_before, 1),
        "commit": _git_commit(),
        "host": platform.node(),
        "load_average": f"{run.load_before} at start, {_load_average()} at end (1-minute, {os.cpu_count()} CPUs)",
        "environment": environment,
        "config": {
            "models": [spec.name for spec in models],
            "tasks": list(config.tasks),
            "compilers": [spec.label for spec in config.compilers],
            "quick": config.quick,
            "warm": config.warm,
            "threads": config.threads,
            "measure": config.measure.__dict__,
            "process_modes": list(modes),
            "order": config.order,
        },
    }
    meta["graph_cache"] = graph_cache_counts(jobs)
    document = json.loads(json.dumps(jsonable(report_json(merge_rows(jobs), jobs, meta))))
    paths = write_outputs(document, config.output_dir, stem)
    print(render_report(rows_from_json(document), meta))
    print(f"wall time: {meta['wall_s']} s; CPU time of the workers: {meta['worker_cpu_s']} s")
    _print_paths(paths)
    return document


def _print_paths(paths: tuple[Path, Path, Path | None]) -> None:
    json_path, md_path, png_path = paths
    print(f"wrote {json_path} and {md_path}")
    print(f"wrote {png_path}" if png_path else "no plot: matplotlib is not installed (pip install matplotlib, then --from-json)")
