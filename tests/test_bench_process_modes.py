"""The harness's process modes: a process per model and compiler ("separate"), or one per model ("same").

In-process tests stand in plain callables for the compilers (as tests/test_bench_harness.py does); one
end-to-end run goes through the command line and real worker processes in both modes, with the eager
calibration and Kiln on the CPU suite's `pointwise_chain`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tools.bench import same_process
from tools.bench import worker as bench_worker
from tools.bench.compare import compare_modes, render_report, rows_for_plot
from tools.bench.config import COMPILERS, EAGER, BenchConfig, CompilerSpec, MeasureConfig, compiler_order
from tools.bench.registry import BuildContext, ModelSpec, Workload, randn
from tools.bench.report import jsonable, merge_rows, report_json, rows_from_json
from tools.bench.results import FAILED, PASSED, JobResult, TaskResult
from tools.bench.runner import PlannedJob, plan_jobs, run_planned
from tools.bench.same_process import SameProcessJob, run_same_process, same_process_job
from tools.bench.suite import MODELS, select_models

ROOT = Path(__file__).resolve().parent.parent

TINY_MEASURE = MeasureConfig(warmup_calls=1, rounds=2, min_time_s=0.01, min_reps=2, max_reps=8, memory_calls=1)
THREE = (COMPILERS["kiln"], EAGER, COMPILERS["torch.compile"])

# ---------------------------------------------------------------- order and planning


def test_compiler_order() -> None:
    assert [c.label for c in compiler_order(THREE, "eager-first")] == ["eager", "torch.compile", "kiln"]
    assert [c.label for c in compiler_order(THREE, "kiln-first")] == ["kiln", "torch.compile", "eager"]
    with_ro = (COMPILERS["kiln-ro"], COMPILERS["kiln"], COMPILERS["torch.compile-ro"], COMPILERS["torch.compile"])
    assert [c.label for c in compiler_order(with_ro, "eager-first")] == [
        "torch.compile-ro", "torch.compile", "kiln-ro", "kiln"  # within a kind, the given order stays
    ]
    with pytest.raises(ValueError, match="unknown order"):
        compiler_order(THREE, "random")


def test_same_process_plan_runs_every_compiler_in_one_process(tmp_path: Path) -> None:
    config = BenchConfig(compilers=THREE, process_mode="same")
    planned = plan_jobs(config, select_models("cpu", ("mlp", "pointwise_chain")), tmp_path, tmp_path / "logs")
    assert [(p.job.model, p.job.phase) for p in planned] == [
        ("mlp", "cold"), ("mlp", "warm"), ("pointwise_chain", "cold"), ("pointwise_chain", "warm")
    ]
    first = planned[0]
    assert isinstance(first.job, SameProcessJob) and first.job.eager_alone_first
    assert [step.compiler.label for step in first.steps] == ["eager", "torch.compile", "kiln"]
    assert planned[0].cache_dir == planned[1].cache_dir != planned[2].cache_dir  # one set of caches per model
    assert first.log_path.name == "mlp-same-cold.log"
    assert SameProcessJob.from_json(json.loads(json.dumps(first.job.to_json()))) == first.job
    kiln_first = same_process_job(config.replace(order="kiln-first"), MODELS["mlp"], "cold")
    assert [s.compiler.label for s in kiln_first.steps] == ["kiln", "torch.compile", "eager"]
    assert not kiln_first.eager_alone_first
    eager_only = plan_jobs(config.replace(compilers=(EAGER,)), select_models("cpu", ("mlp",)), tmp_path, tmp_path)
    assert [p.job.phase for p in eager_only] == ["cold"]  # nothing compiles: no warm phase


def test_a_failed_same_process_fails_every_compiler_and_gets_their_time(tmp_path: Path) -> None:
    job = same_process_job(BenchConfig(compilers=THREE, measure=TINY_MEASURE), MODELS["mlp"], "cold")
    planned = PlannedJob(job, tmp_path / "cache", tmp_path / "same.log")
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    results = run_planned(planned, BenchConfig(timeout_s=0.5), command=hang)
    assert [r.compiler for r in results] == ["eager", "torch.compile", "kiln"]
    assert all(r.process_mode == "same" for r in results)
    for result in results:
        assert all(t.status == FAILED and t.error.startswith("TimeoutError: no result after 2 s") for t in result.tasks)


# ---------------------------------------------------------------- the worker, in this process


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


@pytest.mark.parametrize("order", ["eager-first", "kiln-first"])
def test_same_process_worker_runs_the_order(monkeypatch: pytest.MonkeyPatch, order: str) -> None:
    events: list[str] = []

    def build(ctx: BuildContext) -> Workload:
        events.append("build")
        return Workload(_Tiny(), lambda g: (randn(g, 32, 16, device=ctx.device),))

    def fake_compile(spec: CompilerSpec, model: torch.nn.Module) -> object:
        events.append(f"compile {spec.label}")
        return model

    def wrong_compile(spec: CompilerSpec, model: torch.nn.Module) -> object:  # torch.compile gives a wrong result
        return (lambda x: model(x) * 1.5) if spec.kind == "torch" else fake_compile(spec, model)

    monkeypatch.setitem(MODELS, "tiny", ModelSpec("tiny", "test", build, ("cpu",), (), "a tiny test model"))
    monkeypatch.setattr(bench_worker, "compile_model", wrong_compile)
    monkeypatch.setattr(bench_worker, "startup_probe", lambda spec, device: events.append(f"probe {spec.label}"))
    monkeypatch.setattr(
        same_process, "time_eager_alone",
        lambda job, spec: events.append("eager alone") or dict.fromkeys(job.tasks, 1.25),  # type: ignore[func-returns-value]
    )
    config = BenchConfig(compilers=THREE, tasks=("inference", "training"), measure=TINY_MEASURE, order=order)
    results = run_same_process(same_process_job(config, MODELS["tiny"], "cold"))
    labels = [r.compiler for r in results]
    assert labels == (["eager", "torch.compile", "kiln"] if order == "eager-first" else ["kiln", "torch.compile", "eager"])
    probes = [e for e in events if e.startswith(("probe", "eager alone"))]
    alone = ["eager alone"]
    compilers = [f"probe {label}" for label in labels]
    assert probes == (alone + compilers if order == "eager-first" else compilers + alone)
    by_label = {r.compiler: r for r in results}
    assert all(r.process_mode == "same" for r in results)
    assert all(t.eager_alone_ms == 1.25 for r in results for t in r.tasks)
    # every compiler still gets the usual checks: a wrong result fails its own rows only
    assert [t.status for t in by_label["torch.compile"].tasks] == [FAILED, FAILED]
    assert by_label["torch.compile"].tasks[0].stage == "accuracy"
    for label in ("eager", "kiln"):
        assert all(t.status == PASSED and t.speedup and t.compile_s is not None for t in by_label[label].tasks)


def test_a_same_process_sweep_runs_every_thread_count_in_one_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each thread count: the compilers reset (not before the first), eager timed alone at that count,
    then each compiler with `torch.get_num_threads()` at that count; results carry their count."""
    events: list[str] = []

    def build(ctx: BuildContext) -> Workload:
        return Workload(_Tiny(), lambda g: (randn(g, 32, 16, device=ctx.device),))

    def fake_compile(spec: CompilerSpec, model: torch.nn.Module) -> object:
        events.append(f"compile {spec.label} at {torch.get_num_threads()}")
        return model

    def alone(job: bench_worker.Job, spec: ModelSpec) -> dict[str, float | None]:
        events.append(f"eager alone at {torch.get_num_threads()}")
        return dict.fromkeys(job.tasks, float(torch.get_num_threads()))

    monkeypatch.setitem(MODELS, "tiny", ModelSpec("tiny", "test", build, ("cpu",), (), "a tiny test model"))
    monkeypatch.setattr(bench_worker, "compile_model", fake_compile)
    monkeypatch.setattr(bench_worker, "startup_probe", lambda spec, device: None)
    monkeypatch.setattr(same_process, "time_eager_alone", alone)
    monkeypatch.setattr(same_process, "reset_compilers", lambda: events.append("reset"))
    config = BenchConfig(
        compilers=(COMPILERS["kiln"], COMPILERS["torch.compile"]), tasks=("inference",), measure=TINY_MEASURE,
        process_mode="same", sweep_threads=(2, 1),
    )
    before = torch.get_num_threads()
    try:
        results = run_same_process(same_process_job(config, MODELS["tiny"], "cold"))
    finally:
        torch.set_num_threads(before)
    assert events == [
        "eager alone at 2", "compile torch.compile at 2", "compile kiln at 2",
        "reset", "eager alone at 1", "compile torch.compile at 1", "compile kiln at 1",
    ]
    assert [(r.compiler, r.threads) for r in results] == [("torch.compile", 2), ("kiln", 2), ("torch.compile", 1), ("kiln", 1)]
    assert [r.tasks[0].eager_alone_ms for r in results] == [2.0, 2.0, 1.0, 1.0]
    assert all(r.tasks[0].status == PASSED for r in results)


def test_eager_alone_times_each_task() -> None:
    def build(ctx: BuildContext) -> Workload:
        return Workload(_Tiny(), lambda g: (randn(g, 32, 16, device=ctx.device),))

    config = BenchConfig(compilers=(EAGER,), tasks=("inference", "training"), measure=TINY_MEASURE)
    spec = ModelSpec("tiny", "test", build, ("cpu",), (), "a tiny test model")
    job = same_process_job(config, spec, "cold").steps[0]
    medians = same_process.time_eager_alone(job, spec)
    assert set(medians) == {"inference", "training"} and all(m is not None and m > 0 for m in medians.values())
    broken = ModelSpec("broken", "test", lambda ctx: 1 / 0, ("cpu",), (), "")  # type: ignore[arg-type, return-value]
    assert same_process.time_eager_alone(job, broken) == {"inference": None, "training": None}


# ---------------------------------------------------------------- the report


def _job(compiler: str, mode: str, speedup: float, phase: str = "cold", passed: bool = True) -> JobResult:
    task = TaskResult("m", "inference", compiler, phase, status=PASSED, eager_ms=2.0, compile_s=3.0, rel_error=1e-7)
    if phase == "cold":
        task.speedup, task.compiled_ms = speedup, 2.0 / speedup
        task.eager_alone_ms = 1.0 if mode == "same" else None
    if not passed:
        task.fail("accuracy", "wrong result")
    return JobResult("m", compiler, phase, "cpu", tasks=[task], process_mode=mode, cache_counts={"graph": {"hits": 1}})


def _both_modes() -> list[JobResult]:
    return [
        _job("torch.compile", "separate", 2.0), _job("kiln", "separate", 1.0), _job("kiln", "separate", 0, "warm"),
        _job("torch.compile", "same", 2.1), _job("kiln", "same", 1.5),
        _job("kiln", "same", 0, "warm", passed=False),
    ]


def test_rows_and_comparison_keep_the_modes_apart() -> None:
    rows = merge_rows(_both_modes())
    assert [(r.process_mode, r.compiler) for r in rows] == [
        ("separate", "torch.compile"), ("separate", "kiln"), ("same", "torch.compile"), ("same", "kiln")
    ]
    separate_kiln, same_kiln = rows[1], rows[3]
    assert separate_kiln.passed and separate_kiln.warm_compile_s == 3.0  # its own mode's warm job
    assert not same_kiln.passed and same_kiln.stage == "warm accuracy" and same_kiln.speedup is None
    torch_compile, kiln = compare_modes(rows)
    assert torch_compile.ratio == pytest.approx(1.05) and not torch_compile.disagrees
    assert torch_compile.speedup_over_eager_alone == pytest.approx(1.0 / (2.0 / 2.1))
    assert kiln.ratio is None and kiln.disagrees  # passes in one mode only


def test_report_of_both_modes() -> None:
    jobs = [job for job in _both_modes() if job.phase == "cold"]
    jobs[3].tasks[0].speedup, jobs[3].tasks[0].compiled_ms = 1.5, 2.0 / 1.5  # same-process Kiln: 1.5x against 1.0x
    meta = {"device": "cpu", "date": "today", "command": "c", "config": {"order": "eager-first"}}
    document = json.loads(json.dumps(jsonable(report_json(merge_rows(jobs), jobs, meta))))
    assert [(s["process_mode"], s["compiler"]) for s in document["summary"]] == [
        ("separate", "torch.compile"), ("separate", "kiln"), ("same", "torch.compile"), ("same", "kiln")
    ]
    rows = rows_from_json(document)
    text = render_report(rows, meta)
    assert "separate processes vs the same process" in text
    assert "| m     | inference | torch.compile | 2.000 / 2.000       | 2.00x    | 2.10x | 1.05" in text
    assert "| m     | inference | kiln          | 2.000 / 2.000       | 1.00x    | 1.50x | 1.50" in text
    kiln_line = next(line for line in text.splitlines() if line.startswith("| m     | inference | kiln "))
    assert kiln_line.rstrip().endswith("| ! |")
    assert "separate processes (one per model and compiler)" in text and "same process (one per model), eager-first" in text
    assert "eager ms alone" in text
    assert {r.compiler for r in rows_for_plot(rows)} == {
        "torch.compile (separate)", "kiln (separate)", "torch.compile (same)", "kiln (same)"
    }
    single = render_report([r for r in rows if r.process_mode == "separate"], meta)
    assert "vs the same process" not in single and "eager ms alone" not in single


def test_merging_two_gpus_documents_of_both_modes() -> None:
    from tools.bench.cli import merge_documents

    jobs = _both_modes()
    meta = {"device": "cuda", "date": "today", "command": "gpu0", "config": {"order": "eager-first"}}
    halves = [[j for j in jobs if j.compiler == "torch.compile"], [j for j in jobs if j.compiler == "kiln"]]
    documents = [json.loads(json.dumps(jsonable(report_json(merge_rows(h), h, meta)))) for h in halves]
    merged = merge_documents(documents)
    assert len(merged["rows"]) == 4 and merged["meta"]["merged_from"] == 2
    assert set(merged["meta"]["graph_cache"]) == {
        "torch.compile cold", "kiln cold", "kiln warm", "torch.compile cold, same process", "kiln cold, same process",
        "kiln warm, same process",
    }
    text = render_report(rows_from_json(merged), merged["meta"])
    assert text.count("| m     | inference | ") >= 2 and "separate processes vs the same process" in text
    same_section = text[text.index("same process (one per model)"):]
    assert "kiln cold, same process" in same_section and "| kiln cold " not in same_section


# ---------------------------------------------------------------- end to end


def test_end_to_end_both_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line, real worker processes in both modes (eager calibration and Kiln), the comparison."""
    from tools.bench.cli import main

    argv = ["--device", "cpu", "--models", "pointwise_chain", "--modes", "infer", "--compilers", "eager,kiln",
            "--quick", "--min-time", "0.05", "--process-mode", "both", "--output-dir", str(tmp_path)]
    assert main(argv) == 0
    (path,) = tmp_path.glob("bench-cpu-t2-both-*.json")
    document = json.loads(path.read_text())
    jobs = [(job["process_mode"], job["compiler"]) for job in document["jobs"]]
    assert jobs == [("separate", "eager"), ("separate", "kiln"), ("same", "eager"), ("same", "kiln")]
    assert {log.name for log in next(tmp_path.glob("*-logs")).iterdir()} == {
        "pointwise_chain-eager-cold.log", "pointwise_chain-kiln-cold.log", "pointwise_chain-same-cold.log"
    }
    rows = {(row["process_mode"], row["compiler"]): row for row in document["rows"]}
    assert len(rows) == 4
    for (mode, compiler), row in rows.items():
        assert row["status"] == PASSED, (mode, compiler, row["error"])
        assert row["model"] == "pointwise_chain" and row["task"] == "inference"
        assert row["speedup"] > 0 and row["cold_compile_s"] is not None and row["rel_error"] < row["tolerance"]
        assert (row["eager_alone_ms"] is not None) == (mode == "same")
    assert rows[("separate", "eager")]["rel_error"] == 0.0 == rows[("same", "eager")]["rel_error"]
    assert document["meta"]["config"]["process_modes"] == ["separate", "same"]
    out = capsys.readouterr().out
    assert "## Speedup over eager: separate processes vs the same process" in out
    assert "| pointwise_chain | inference | kiln " in out and "| pointwise_chain | inference | eager " in out
    assert next(tmp_path.glob("bench-cpu-t2-both-*.md")).read_text() in out
