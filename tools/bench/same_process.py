"""The same-process mode: one worker process runs eager, torch.compile and Kiln one after another on a model.

A user's script or notebook measures eager, then `torch.compile`, then Kiln in one Python process; the
default harness gives every compiler a fresh process. What one compiler leaves behind (imported
modules, global flags, compile worker pools, the CUDA caching allocator's pools, Triton's kernel cache,
a warmed-up GPU) can change the next one's numbers, so this mode runs the notebook's order on purpose.

A `SameProcessJob` is an ordered list of ordinary worker `Job`s for one model, one per compiler; each
runs exactly as in its own process (`worker.run_job`: start-up probe, then per task build, eager
reference, compile, accuracy, paired timing, memory, fresh inputs), just in a shared process and
sharing one set of cache directories. Eager is also timed on its own (`eager_alone_ms`): first, before
any compiler ran, in the "eager-first" order (eager, torch.compile, Kiln), or last in the
"kiln-first" order (Kiln, torch.compile, eager).

A CPU thread sweep (`BenchConfig.sweep_threads`) runs all of that once per thread count, in one process:
the compilers' caches are reset between counts, so each count compiles afresh (torch.compile's C++
kernels take their thread count at compile time), while the process start-up (torch.compile's worker
pool: about 50 s per process on a 16-core host) is paid once, and no other run shares the machine.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from tools.bench.config import BenchConfig, compiler_order
from tools.bench.registry import BuildContext, ModelSpec
from tools.bench.results import JobResult
from tools.bench.stats import median
from tools.bench.steps import TaskRunner
from tools.bench.suite import MODELS
from tools.bench.timing import calls_per_block, synchronize, time_calls
from tools.bench.worker import Job, run_job

SAME = "same"


@dataclass(frozen=True)
class SameProcessJob:
    """What one same-process worker runs: a job per compiler for one model, in order.

    `eager_alone_first` times eager on its own before the first job (else after the last).
    """

    steps: tuple[Job, ...]
    eager_alone_first: bool = True

    @property
    def model(self) -> str:
        """The model every step runs."""
        return self.steps[0].model

    @property
    def phase(self) -> str:
        """"cold" (empty caches, measured) or "warm" (caches the cold process filled)."""
        return self.steps[0].phase

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (a worker tells it from a single `Job` by its `steps`)."""
        return {"steps": [step.to_json() for step in self.steps], "eager_alone_first": self.eager_alone_first}

    @staticmethod
    def from_json(data: dict[str, Any]) -> SameProcessJob:
        """The inverse of `to_json`."""
        return SameProcessJob(tuple(Job.from_json(step) for step in data["steps"]), data["eager_alone_first"])


def same_process_job(config: BenchConfig, spec: ModelSpec, phase: str) -> SameProcessJob:
    """The job for `spec` in `phase`: `config`'s compilers in `config.order`, at each thread count of
    `config.sweep_threads` in turn (else at `config.threads`)."""
    compilers = compiler_order(config.compilers, config.order)
    steps = tuple(
        Job(spec.name, config.device, config.tasks, compiler, phase, config.measure, threads, config.seed)
        for threads in config.sweep_threads or (config.threads,)
        for compiler in compilers
    )
    return SameProcessJob(steps, eager_alone_first=config.order == "eager-first")


def time_eager_alone(job: Job, spec: ModelSpec) -> dict[str, float | None]:
    """Eager's median milliseconds per call of each task, timed on its own (no compiled model in between).

    The model and inputs are the ones every step builds (same seeds), built once for all tasks (a
    training step without an optimizer leaves the weights as they were); as many calls as one side of
    the paired timing gets. None for a task whose model does not build or run (its steps report why).
    """
    medians: dict[str, float | None] = dict.fromkeys(job.tasks)
    try:
        torch.manual_seed(job.seed)
        workload = spec.build(BuildContext(job.device))
        for task in job.tasks:
            generator = torch.Generator().manual_seed(job.seed + 1)
            runner = TaskRunner(workload, task, job.device, job.seed)
            inputs = runner.prepare(workload.model, workload.make_inputs(generator))

            def call() -> object:
                return runner.step(workload.model, workload.model, inputs)  # called within this iteration

            warmup = time_calls(call, max(job.measure.warmup_calls, 1), job.device)
            count = calls_per_block(median(warmup), job.measure) * job.measure.rounds
            medians[task] = median(time_calls(call, count, job.device))
            synchronize(job.device)
    except Exception:
        pass
    finally:
        if job.device == "cuda":
            torch.cuda.empty_cache()
    return medians


def reset_compilers() -> None:
    """Forget every compiled model of both compilers in this process (the next compile starts afresh)."""
    torch._dynamo.reset()
    import frontend

    frontend.reset()


def run_same_process(job: SameProcessJob) -> list[JobResult]:
    """Run every step of `job` in this process, in order; one `JobResult` per compiler (and thread count),
    marked "same". Steps at another thread count than the previous ones start from reset compilers."""
    spec, first = MODELS[job.model], job.steps[0]
    timed = first.phase == "cold" and (first.device != "cuda" or torch.cuda.is_available())
    results: list[JobResult] = []
    for index, threads in enumerate(dict.fromkeys(step.threads for step in job.steps)):
        steps = [step for step in job.steps if step.threads == threads]
        if first.device == "cpu":
            torch.set_num_threads(threads)
        if index:
            reset_compilers()
        eager_alone: dict[str, float | None] = {}
        if timed and job.eager_alone_first:
            eager_alone = time_eager_alone(steps[0], spec)
        done = []
        for step in steps:
            result = run_job(step)
            result.process_mode = SAME
            done.append(result)
        if timed and not job.eager_alone_first:
            eager_alone = time_eager_alone(steps[0], spec)
        for result in done:
            result.tasks = [dataclasses.replace(task, eager_alone_ms=eager_alone.get(task.task)) for task in result.tasks]
        results += done
    return results
