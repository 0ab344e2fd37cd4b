"""Running the suite: one subprocess per model, compiler and phase, each with its own cache directories.

For every model and compiler the runner starts a cold process (fresh, empty `KILN_CACHE_DIR`,
`TORCHINDUCTOR_CACHE_DIR`, `TRITON_CACHE_DIR` and `XDG_CACHE_HOME`), then a warm one on the same,
now populated, directories. In the same-process mode (`config.process_mode == "same"`) one process
per model and phase runs every compiler in turn (`tools.bench.same_process`), with one set of cache
directories per model. A process that crashes, hangs past the timeout or writes no result fails its
rows with the last line of its stderr; nothing a failed process did counts as fast.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.bench.config import BenchConfig, CompilerSpec
from tools.bench.registry import ModelSpec
from tools.bench.results import JobResult, TaskResult
from tools.bench.same_process import SAME, SameProcessJob, same_process_job
from tools.bench.worker import Job

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_VARIABLES = ("KILN_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME")


@dataclass(frozen=True)
class PlannedJob:
    """A job (one compiler, or several in turn in one process) and where its process keeps caches and logs."""

    job: Job | SameProcessJob
    cache_dir: Path
    log_path: Path

    @property
    def steps(self) -> tuple[Job, ...]:
        """The compiler jobs its process runs, in order."""
        return self.job.steps if isinstance(self.job, SameProcessJob) else (self.job,)


def plan_jobs(config: BenchConfig, models: list[ModelSpec], scratch: Path, logs: Path) -> list[PlannedJob]:
    """Cold then warm job for every model and compiler, in that order; warm shares its cold job's caches.

    Same-process mode: a cold then a warm job per model, each running all the compilers in `config.order`.
    """
    planned = []
    if config.process_mode == SAME:
        warm = config.warm and any(compiler.kind != "eager" for compiler in config.compilers)
        for spec in models:
            for phase in ("cold", "warm") if warm else ("cold",):
                cache_dir, log_path = scratch / f"{spec.name}-same", logs / f"{spec.name}-same-{phase}.log"
                planned.append(PlannedJob(same_process_job(config, spec, phase), cache_dir, log_path))
        return planned
    for spec in models:
        for compiler in config.compilers:
            cache_dir = scratch / f"{spec.name}-{compiler.label}"
            phases = ("cold", "warm") if config.warm and compiler.kind != "eager" else ("cold",)
            for phase in phases:
                job = Job(spec.name, config.device, config.tasks, compiler, phase, config.measure, config.threads, config.seed)
                planned.append(PlannedJob(job, cache_dir, logs / f"{spec.name}-{compiler.label}-{phase}.log"))
    return planned


def job_environment(planned: PlannedJob, config: BenchConfig, base: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment: private cache dirs, thread counts, no network, our packages importable."""
    env = dict(os.environ if base is None else base)
    for variable in CACHE_VARIABLES:
        path = planned.cache_dir / variable.lower()
        path.mkdir(parents=True, exist_ok=True)
        env[variable] = str(path)
    if config.device == "cpu":
        env["OMP_NUM_THREADS"] = str(max(config.sweep_threads or (config.threads,)))
    env.pop("TRITON_INTERPRET", None)  # CI's CPU test switch: a benchmark never runs interpreted kernels
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    sources = [str(REPO_ROOT)] + [str(p) for p in sorted((REPO_ROOT / "packages").glob("*/src"))]
    existing = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = os.pathsep.join([*sources[:1], *([existing] if existing else []), *sources[1:]])
    return env


def _stderr_tail(log_path: Path) -> str:
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


def failed_job(planned: PlannedJob, message: str) -> list[JobResult]:
    """A result per compiler of the planned process, every task failed at the `process` stage with `message`."""
    mode = SAME if isinstance(planned.job, SameProcessJob) else "separate"
    results = []
    for job in planned.steps:
        result = JobResult(job.model, job.compiler.label, job.phase, job.device, process_mode=mode)
        result.threads = job.threads if job.device == "cpu" else None
        result.tasks = [
            TaskResult(job.model, task, job.compiler.label, job.phase).fail("process", message) for task in job.tasks
        ]
        results.append(result)
    return results


def read_results(data: dict[str, Any]) -> list[JobResult]:
    """The `JobResult`s of a worker's result file: one, or `{"jobs": [...]}` from a same-process worker."""
    jobs: list[dict[str, Any]] = data["jobs"] if "jobs" in data else [data]
    return [JobResult.from_json(job) for job in jobs]


def run_planned(planned: PlannedJob, config: BenchConfig, command: list[str] | None = None) -> list[JobResult]:
    """Run one planned process and read its results (one per compiler); a crash or timeout fails its rows.

    The timeout is `config.timeout_s` per compiler the process runs.
    """
    timeout_s = config.timeout_s * len(planned.steps)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-job-") as folder:
        job_path, result_path = Path(folder) / "job.json", Path(folder) / "result.json"
        job_path.write_text(json.dumps(planned.job.to_json()))
        argv = command or [sys.executable, "-m", "tools.bench.worker"]
        planned.log_path.parent.mkdir(parents=True, exist_ok=True)
        with planned.log_path.open("w") as log:
            process = subprocess.Popen(
                [*argv, str(job_path), str(result_path)],
                cwd=REPO_ROOT,
                env=job_environment(planned, config),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: a timeout kills compile workers too
            )
            try:
                returncode = process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return failed_job(planned, f"TimeoutError: no result after {timeout_s:.0f} s (log: {planned.log_path})")
        if not result_path.exists():
            tail = _stderr_tail(planned.log_path) or "no output"
            return failed_job(planned, f"worker exited with code {returncode} and no result: {tail}")
        try:
            return read_results(json.loads(result_path.read_text()))
        except (ValueError, TypeError, KeyError) as error:  # a worker of another version, a torn file
            return failed_job(planned, f"unreadable worker result: {type(error).__name__}: {error}")


def run_suite(
    config: BenchConfig,
    models: list[ModelSpec],
    logs: Path,
    progress: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
) -> list[JobResult]:
    """Run every planned job, one at a time (timings need a quiet machine), reporting progress."""
    results: list[JobResult] = []
    with tempfile.TemporaryDirectory(prefix="kiln-bench-caches-") as scratch:
        planned = plan_jobs(config, models, Path(scratch), logs)
        for index, item in enumerate(planned, 1):
            begin = time.perf_counter()
            done = run_planned(item, config)
            results += done
            seconds = time.perf_counter() - begin
            for step, result in zip(item.steps, done):
                progress(f"[{index}/{len(planned)}] {_describe(step.compiler, step, isinstance(item.job, SameProcessJob))} "
                         f"{seconds:5.1f} s  {_outcome(result)}")
    return results


def _describe(compiler: CompilerSpec, job: Job, shared: bool = False) -> str:
    return f"{job.model:<18} {compiler.label:<16} {job.phase:<4}{' (same process)' if shared else ''}"


def _outcome(result: JobResult) -> str:
    parts = []
    for task in result.tasks:
        if task.passed:
            detail = f"{task.speedup:.2f}x" if task.speedup is not None else f"compile {task.compile_s:.1f} s"
            parts.append(f"{task.task}: {detail}")
        else:
            parts.append(f"{task.task}: {task.status} ({task.stage}: {task.error[:80]})")
    return "; ".join(parts)
