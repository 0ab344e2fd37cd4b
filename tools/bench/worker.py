"""The per-model worker: one subprocess runs one model under one compiler in one phase.

`python -m tools.bench.worker JOB.json RESULT.json` reads a `Job`, runs each of its tasks and writes a
`JobResult`. Per task (cold phase):

1. build the model (seeded) and a deep copy for the compiler, so both start from the same weights;
   draw two sets of random inputs, A and B;
2. eager reference on A;
3. compile and run on A, timed: the cold (or warm) compile seconds;
4. compare with eager's A (a wrong result fails the row here);
5. paired, interleaved timing of eager and compiled on A; peak memory of each;
6. align eager's state with the compiled model's, run both on fresh inputs B and compare again
   (catches stale caching and mis-specialization).

The warm phase stops after step 4: it measures compile time with a populated cache and checks the
cached code is still right. In the same-process mode one worker runs several jobs of a model in turn
(`tools.bench.same_process`), each exactly as here.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from tools.bench.accuracy import verdict
from tools.bench.compilers import before_each_call, compile_model, startup_probe
from tools.bench.config import CompilerSpec, MeasureConfig
from tools.bench.registry import BuildContext, ModelSpec
from tools.bench.results import PASSED, SKIPPED, JobResult, TaskResult, WarningRecorder, first_line
from tools.bench.steps import TaskRunner, check_inputs_random, snapshot_state
from tools.bench.suite import MODELS
from tools.bench.timing import paired_timing, peak_memory_mb, synchronize


@dataclass(frozen=True)
class Job:
    """What one worker process runs: a model, its tasks, one compiler, a phase and the measurement settings."""

    model: str
    device: str
    tasks: tuple[str, ...]
    compiler: CompilerSpec
    phase: str
    measure: MeasureConfig
    threads: int = 2
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Job:
        """The inverse of `to_json`."""
        return Job(
            **{
                **data,
                "tasks": tuple(data["tasks"]),
                "compiler": CompilerSpec(**data["compiler"]),
                "measure": MeasureConfig(**data["measure"]),
            }
        )


class _Stage:
    """Names the step a task is in, so a failure says where it happened."""

    def __init__(self) -> None:
        self.name = "build"


def run_task(job: Job, spec: ModelSpec, task: str) -> TaskResult:
    """Run one task of the job's model; never raises: errors become a failed row with their stage."""
    row = TaskResult(spec.name, task, job.compiler.label, job.phase, family=spec.family)
    stage = _Stage()
    try:
        _measure_task(job, spec, task, row, stage)
    except ImportError as error:
        if stage.name == "build":
            row.status, row.stage, row.error = SKIPPED, "build", first_line(error)
        else:
            row.fail(stage.name, error)
    except Exception as error:
        row.fail(stage.name, error)
    finally:
        if job.device == "cuda":
            torch.cuda.empty_cache()
    return row


def _measure_task(job: Job, spec: ModelSpec, task: str, row: TaskResult, stage: _Stage) -> None:
    device, measure = job.device, job.measure
    # 1. build: the same seed gives the same weights and inputs in every process
    torch.manual_seed(job.seed)
    workload = spec.build(BuildContext(device))
    row.source = workload.source
    model = workload.model
    compiled_model = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(job.seed + 1)
    inputs_a, inputs_b = workload.make_inputs(generator), workload.make_inputs(generator)
    check_inputs_random(inputs_a)
    check_inputs_random(inputs_b)
    runner = TaskRunner(workload, task, device, job.seed)
    inputs_a = runner.prepare(model, inputs_a)
    inputs_b = runner.prepare(compiled_model, inputs_b)
    autocast = workload.autocast is not None and device == "cuda"

    # 2. eager reference (and a second call: lazy library init is not charged to compiling)
    stage.name = "eager"
    initial_state = snapshot_state(model)
    eager_a = runner.result(model, model, inputs_a)
    runner.step(model, model, inputs_a)

    # 3. compile: from the compile call to the end of the first compiled call
    stage.name = "compile"
    synchronize(device)
    with WarningRecorder() as recorder:
        begin = time.perf_counter()
        compiled = compile_model(job.compiler, compiled_model)
        runner.before_call = before_each_call(job.compiler)
        compiled_a = runner.result(compiled, compiled_model, inputs_a)
        synchronize(device)
        row.compile_s = time.perf_counter() - begin
    row.notes = recorder.messages

    # 4. right on the compile inputs?
    stage.name = "accuracy"
    check = verdict(
        compiled_a, eager_a, autocast=autocast, fp64_reference=lambda: runner.fp64_result(model, initial_state, inputs_a),
        fp64_perturbed=lambda seed: runner.fp64_result(model, initial_state, inputs_a, perturb_seed=seed),
    )
    _record_verdict(row, check)
    if not check.passed:
        row.fail("accuracy", check.explain())
        return
    if job.phase == "warm":
        row.status = PASSED
        return

    # 5. paired timing, then peak memory of both at the same point of the run
    stage.name = "measure"
    timing = paired_timing(
        lambda: runner.step(model, model, inputs_a),
        lambda: runner.step(compiled, compiled_model, inputs_a),
        device,
        measure,
    )
    row.eager_timing, row.compiled_timing = dataclasses.asdict(timing.eager), dataclasses.asdict(timing.compiled)
    row.eager_ms, row.compiled_ms = timing.eager.median, timing.compiled.median
    row.round_speedups = list(timing.round_speedups)
    row.eager_peak_mb, row.memory_kind = peak_memory_mb(
        lambda: runner.step(model, model, inputs_a), device, measure.memory_calls
    )
    row.compiled_peak_mb, _ = peak_memory_mb(
        lambda: runner.step(compiled, compiled_model, inputs_a), device, measure.memory_calls
    )

    # 6. right on fresh inputs, from the compiled model's current state?
    stage.name = "fresh_inputs"
    model.load_state_dict(compiled_model.state_dict())
    state_b = snapshot_state(model)
    eager_b = runner.result(model, model, inputs_b)
    compiled_b = runner.result(compiled, compiled_model, inputs_b)
    check_b = verdict(
        compiled_b, eager_b, autocast=autocast, fp64_reference=lambda: runner.fp64_result(model, state_b, inputs_b),
        fp64_perturbed=lambda seed: runner.fp64_result(model, state_b, inputs_b, perturb_seed=seed),
    )
    if check_b.rel_error > check.rel_error or not check_b.passed:
        _record_verdict(row, check_b)
    if not check_b.passed:
        row.fail("fresh_inputs", check_b.explain() + " (fresh inputs, after timing)")
        return
    row.speedup = timing.speedup
    row.status = PASSED


def _record_verdict(row: TaskResult, check: Any) -> None:
    row.rel_error, row.tolerance, row.worst_tensor = check.rel_error, check.tolerance, check.worst_tensor
    row.fp64_error, row.eager_fp64_error = check.fp64_error, check.eager_fp64_error
    row.fp64_sensitivity = check.fp64_sensitivity


def environment(device: str) -> dict[str, str]:
    """Versions and hardware the numbers depend on."""
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpu_threads": str(torch.get_num_threads()),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    try:
        import frontend

        env["kiln"] = getattr(frontend, "__version__", "unknown")
    except ImportError as error:
        env["kiln"] = f"not importable ({first_line(error)})"
    if device == "cuda" and torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["cuda"] = str(torch.version.cuda)
    return env


def _kiln_compile_stages() -> dict[str, float]:
    """Kiln's own per-stage compile seconds for this process (start-up probe included), if it reports them."""
    try:
        import frontend

        stages = frontend.compile_times(repr="dict")
        return {str(k): float(v) for k, v in stages.items()} if isinstance(stages, dict) else {}
    except Exception:
        return {}


def _kiln_cache_counts() -> dict[str, dict[str, int]]:
    """Kiln's graph-cache hits and misses per stage in this process (start-up probe included), if it reports them."""
    try:
        import frontend

        counts = frontend.compile_times(repr="cache")
        return {str(k): dict(v) for k, v in counts.items()} if isinstance(counts, dict) else {}
    except Exception:
        return {}


def run_job(job: Job) -> JobResult:
    """Run every task of `job` in this process (after the compiler's start-up probe)."""
    begin = time.perf_counter()
    if job.device == "cpu":
        torch.set_num_threads(job.threads)
    result = JobResult(job.model, job.compiler.label, job.phase, job.device, environment=environment(job.device))
    result.threads = job.threads if job.device == "cpu" else None
    if job.device == "cuda" and not torch.cuda.is_available():
        result.tasks = [
            TaskResult(job.model, task, job.compiler.label, job.phase).fail("build", "RuntimeError: CUDA is not available")
            for task in job.tasks
        ]
        return result
    kiln = job.compiler.kind == "kiln"
    # Kiln's counters are per process: a same-process worker's earlier Kiln jobs are subtracted
    stages_before, counts_before = (_kiln_compile_stages(), _kiln_cache_counts()) if kiln else ({}, {})
    start = time.perf_counter()
    try:
        startup_probe(job.compiler, job.device)
        synchronize(job.device)
        result.startup_s = time.perf_counter() - start
    except Exception as error:  # the tasks still run: their own errors are more specific
        result.startup_error = first_line(error)
    spec = MODELS[job.model]
    result.tasks = [run_task(job, spec, task) for task in job.tasks]
    if kiln:
        result.compile_stages = {
            stage: seconds - stages_before.get(stage, 0.0) for stage, seconds in _kiln_compile_stages().items()
        }
        result.cache_counts = {
            stage: {kind: n - counts_before.get(stage, {}).get(kind, 0) for kind, n in counts.items()}
            for stage, counts in _kiln_cache_counts().items()
        }
    result.wall_s = time.perf_counter() - begin
    return result


def main(argv: list[str]) -> int:
    """Entry point of the worker subprocess: `JOB.json RESULT.json`.

    A `Job` gives one `JobResult`; a same-process job (several compilers in turn, see
    `tools.bench.same_process`) gives `{"jobs": [JobResult, ...]}`, one per compiler in the order they ran.
    """
    if len(argv) != 3:
        print("usage: python -m tools.bench.worker JOB.json RESULT.json", file=sys.stderr)
        return 2
    data = json.loads(Path(argv[1]).read_text())
    if "steps" in data:
        from tools.bench.same_process import SameProcessJob, run_same_process  # it builds on this module

        output: dict[str, Any] = {"jobs": [r.to_json() for r in run_same_process(SameProcessJob.from_json(data))]}
    else:
        output = run_job(Job.from_json(data)).to_json()
    temporary = Path(argv[2] + ".tmp")
    temporary.write_text(json.dumps(output, indent=1))
    os.replace(temporary, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
