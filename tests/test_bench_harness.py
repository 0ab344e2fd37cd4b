"""The benchmark harness's own logic: statistics, accuracy verdicts, failure marking, reports, processes.

Fast and compiler-free: "compilers" here are plain callables standing in for torch.compile and Kiln,
some of them deliberately wrong, to show the harness never counts a wrong result as fast.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from tools.bench import accuracy, stats
from tools.bench import worker as bench_worker
from tools.bench.config import COMPILERS, EAGER, BenchConfig, MeasureConfig, parse_compilers, parse_tasks
from tools.bench.registry import BuildContext, ModelSpec, Workload, randn
from tools.bench.report import (
    Row,
    jsonable,
    merge_rows,
    render_markdown,
    report_json,
    rows_from_json,
    summarize_rows,
)
from tools.bench.results import FAILED, PASSED, JobResult, TaskResult
from tools.bench.runner import PlannedJob, job_environment, plan_jobs, run_planned
from tools.bench.steps import TaskRunner, check_inputs_random, snapshot_state
from tools.bench.suite import select_models
from tools.bench.worker import Job, run_task

ROOT = Path(__file__).resolve().parent.parent

TINY_MEASURE = MeasureConfig(warmup_calls=1, rounds=2, min_time_s=0.01, min_reps=2, max_reps=8, memory_calls=1)

# ---------------------------------------------------------------- statistics


def test_quantiles_and_median() -> None:
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert stats.quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.25) == 2.0
    summary = stats.summarize([10.0, 1.0, 2.0, 3.0, 4.0])
    assert (summary.median, summary.minimum, summary.count) == (3.0, 1.0, 5)
    assert summary.spread == pytest.approx((4.0 - 2.0) / 3.0)
    with pytest.raises(ValueError):
        stats.median([])


def test_geomean() -> None:
    assert stats.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert stats.geomean([]) is None
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError):
            stats.geomean([1.0, bad])


# ---------------------------------------------------------------- accuracy


def test_relative_error() -> None:
    x = torch.randn(100)
    assert accuracy.relative_error(x, x.clone()) == 0.0
    assert accuracy.relative_error(x * 1.01, x) == pytest.approx(0.01, rel=1e-4)
    assert accuracy.relative_error(x[:50], x) == math.inf  # shape change
    assert accuracy.relative_error(x.double(), x) == math.inf  # dtype change
    with_nan = x.clone()
    with_nan[3] = math.nan
    assert accuracy.relative_error(with_nan, x) == math.inf  # a new NaN
    assert accuracy.relative_error(with_nan, with_nan.clone()) == 0.0  # NaN where eager has it too
    ints = torch.randint(0, 10, (20,))
    assert accuracy.relative_error(ints, ints.clone()) == 0.0
    assert accuracy.relative_error(ints + 1, ints) == math.inf


def test_verdict_fails_a_wrong_result_and_passes_rounding() -> None:
    expected = {"out.0": torch.randn(64, 64), "grad.w": torch.randn(64)}
    close = {name: t + 1e-6 * torch.randn_like(t) for name, t in expected.items()}
    assert accuracy.verdict(close, expected).passed
    wrong = dict(close, **{"grad.w": expected["grad.w"] * 2})
    check = accuracy.verdict(wrong, expected)
    assert not check.passed and check.worst_tensor == "grad.w" and "grad.w" in check.explain()
    missing = {"out.0": expected["out.0"]}
    assert not accuracy.verdict(missing, expected).passed


def test_verdict_float64_second_opinion() -> None:
    reference = {"out.0": torch.randn(1000, dtype=torch.float64)}
    eager = {"out.0": (reference["out.0"] + 0.01 * torch.randn(1000, dtype=torch.float64)).float()}
    closer = {"out.0": (reference["out.0"] + 0.005 * torch.randn(1000, dtype=torch.float64)).float()}
    far = {"out.0": (reference["out.0"] + 0.2 * torch.randn(1000, dtype=torch.float64)).float()}
    calls = []

    def fp64() -> accuracy.Result:
        calls.append(1)
        return reference

    assert accuracy.verdict(closer, eager, fp64_reference=fp64).passed  # over tolerance, but as good as eager
    check = accuracy.verdict(far, eager, fp64_reference=fp64)
    assert not check.passed and check.fp64_error is not None and "float64" in check.explain()
    assert accuracy.verdict(eager, eager, fp64_reference=fp64).passed
    assert len(calls) == 2  # consulted only when over tolerance


def test_verdict_float64_sensitivity_opinion() -> None:
    # A reference that itself moves by 0.1 under rounding-sized perturbations (a ReLU mask flipping)
    # cannot fail a result 0.1 away from it; a result far beyond that movement still fails.
    torch.manual_seed(0)
    reference = {"out.0": torch.randn(1000, dtype=torch.float64)}
    eager = {"out.0": reference["out.0"].float()}
    flipped = {"out.0": (reference["out.0"] + 0.1 * torch.randn(1000, dtype=torch.float64)).float()}
    wrong = {"out.0": (reference["out.0"] + 2.0 * torch.randn(1000, dtype=torch.float64)).float()}
    seeds: list[int] = []

    def perturbed(seed: int) -> accuracy.Result:
        seeds.append(seed)
        noise = torch.randn(1000, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        return {"out.0": reference["out.0"] + 0.1 * noise}

    check = accuracy.verdict(flipped, eager, fp64_reference=lambda: reference, fp64_perturbed=perturbed)
    assert check.passed and check.fp64_sensitivity is not None and check.fp64_sensitivity > 0.05
    assert seeds == list(range(accuracy.PERTURBED_RUNS))
    check = accuracy.verdict(wrong, eager, fp64_reference=lambda: reference, fp64_perturbed=perturbed)
    assert not check.passed and "perturbations" in check.explain()
    # a well-conditioned reference (it does not move) keeps failing a result eager beats
    steady = accuracy.verdict(flipped, eager, fp64_reference=lambda: reference, fp64_perturbed=lambda seed: reference)
    assert not steady.passed


def test_float64_reference_perturbation_is_small_and_seeded() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    workload = Workload(model, lambda g: (randn(g, 2, 4, device="cpu"),))
    runner = TaskRunner(workload, "training", "cpu", 0)
    state = snapshot_state(model)
    inputs = runner.prepare(model, workload.make_inputs(torch.Generator().manual_seed(0)))
    exact = runner.fp64_result(model, state, inputs)
    moved = runner.fp64_result(model, state, inputs, perturb_seed=1)
    again = runner.fp64_result(model, state, inputs, perturb_seed=1)
    moved_any = False
    for name, tensor in exact.items():
        difference = (moved[name] - tensor).abs().max().item()
        assert difference < 1e-6 * (tensor.abs().max().item() + 1), name
        moved_any = moved_any or difference > 0
        assert torch.equal(moved[name], again[name])  # seeded
    assert moved_any


def test_inputs_must_be_random() -> None:
    generator = torch.Generator().manual_seed(0)  # a seeded draw: three equal integers would read as constant
    check_inputs_random((torch.randn(4, 4, generator=generator), torch.tensor([3, 1, 7])))
    with pytest.raises(ValueError, match="constant"):
        check_inputs_random((torch.randn(4), torch.zeros(8)))


# ---------------------------------------------------------------- failure marking in the worker


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 8)
        self.norm = torch.nn.BatchNorm1d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.norm(self.linear(x)))


def _tiny_spec() -> ModelSpec:
    def build(ctx: BuildContext) -> Workload:
        return Workload(_Tiny(), lambda g: (randn(g, 32, 16, device=ctx.device),))

    return ModelSpec("tiny", "test", build, ("cpu",), (), "a tiny test model")


class _DoubleGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def, override]
        return x.clone()

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def, override]
        return grad * 2


def _fake_compilers(model: torch.nn.Module) -> dict[str, object]:
    first: list[torch.Tensor] = []

    def stale(x: torch.Tensor) -> torch.Tensor:  # returns its first answer forever
        if not first:
            first.append(model(x).detach())
        return first[0]

    return {
        "right": model,
        "wrong_output": lambda x: model(x) * 1.01,
        "wrong_gradient": lambda x: _DoubleGradient.apply(model(x)),
        "stale": stale,
        "crashing": lambda x: (_ for _ in ()).throw(RuntimeError("kernel exploded\nsecond line")),
    }


def _run_fake(monkeypatch: pytest.MonkeyPatch, behaviour: str, task: str, phase: str = "cold") -> TaskResult:
    monkeypatch.setattr(bench_worker, "compile_model", lambda spec, model: _fake_compilers(model)[behaviour])
    job = Job("tiny", "cpu", (task,), COMPILERS["kiln"], phase, TINY_MEASURE)
    return run_task(job, _tiny_spec(), task)


@pytest.mark.parametrize("task", ["inference", "training"])
def test_right_result_passes_with_a_speedup(monkeypatch: pytest.MonkeyPatch, task: str) -> None:
    row = _run_fake(monkeypatch, "right", task)
    assert row.status == PASSED, row.error
    assert row.speedup is not None and row.speedup > 0 and row.rel_error == 0.0
    assert row.compile_s is not None and row.eager_timing and row.eager_timing["count"] >= 2
    assert row.eager_peak_mb and row.compiled_peak_mb


@pytest.mark.parametrize(
    ("behaviour", "task", "stage"),
    [
        ("wrong_output", "inference", "accuracy"),
        ("wrong_gradient", "training", "accuracy"),
        ("stale", "inference", "fresh_inputs"),
        ("crashing", "inference", "compile"),
    ],
)
def test_wrong_or_failed_result_is_never_fast(
    monkeypatch: pytest.MonkeyPatch, behaviour: str, task: str, stage: str
) -> None:
    row = _run_fake(monkeypatch, behaviour, task)
    assert row.status == FAILED and row.stage == stage
    assert row.speedup is None
    assert "\n" not in row.error
    if behaviour == "crashing":
        assert row.error == "RuntimeError: kernel exploded"


def test_warm_phase_checks_but_does_not_time(monkeypatch: pytest.MonkeyPatch) -> None:
    row = _run_fake(monkeypatch, "right", "training", phase="warm")
    assert row.status == PASSED and row.compile_s is not None and row.compiled_timing is None
    assert _run_fake(monkeypatch, "wrong_gradient", "training", phase="warm").status == FAILED


# ---------------------------------------------------------------- report


def _task(model: str, task: str, compiler: str, phase: str, speedup: float | None, compile_s: float) -> TaskResult:
    result = TaskResult(model, task, compiler, phase, status=PASSED, eager_ms=2.0, compile_s=compile_s, rel_error=1e-7)
    result.speedup = speedup
    if speedup is not None:
        result.compiled_ms = 2.0 / speedup
    return result


def _jobs() -> list[JobResult]:
    jobs = []
    for compiler, speedups in (("torch.compile", (2.0, 8.0)), ("kiln", (4.0, 1.0))):
        cold = JobResult("m", compiler, "cold", "cpu", startup_s=5.0)
        warm = JobResult("m", compiler, "warm", "cpu")
        for task, speedup in zip(("inference", "training"), speedups):
            cold.tasks.append(_task("m", task, compiler, "cold", speedup, 10.0))
            warm.tasks.append(_task("m", task, compiler, "warm", None, 1.0))
        jobs += [cold, warm]
    jobs[3].tasks[1].fail("accuracy", "wrong result: relative error 0.5 > tolerance 0.001 in grad.w")  # kiln warm
    return jobs


def test_merge_and_summary_exclude_failures() -> None:
    rows = merge_rows(_jobs())
    assert len(rows) == 4
    kiln_training = next(r for r in rows if r.compiler == "kiln" and r.task == "training")
    assert not kiln_training.passed and kiln_training.speedup is None and kiln_training.stage == "warm accuracy"
    assert all(r.warm_compile_s == 1.0 for r in rows)
    summaries = {s.compiler: s for s in summarize_rows(rows)}
    assert summaries["torch.compile"].geomean_speedup == pytest.approx(4.0)
    assert summaries["kiln"].geomean_speedup == pytest.approx(4.0)  # only its passing row
    assert summaries["kiln"].passed == 1 and summaries["kiln"].total == 2
    assert summaries["torch.compile"].geomean_speedup_common == pytest.approx(2.0)  # the row both passed
    assert summaries["torch.compile"].cold_compile_s_common == pytest.approx(10.0)
    assert summaries["kiln"].failures and "grad.w" in summaries["kiln"].failures[0]


def test_markdown_and_json_outputs() -> None:
    jobs = _jobs()
    rows = merge_rows(jobs)
    rows[0].rel_error = math.inf
    meta = {"device": "cpu", "date": "today", "command": "python -m tools.bench --quick"}
    text = render_markdown(rows, meta)
    assert "| m " in text and "2.00x" in text and "FAIL (warm accuracy)" in text
    assert "1/2" in text and "## Failures" in text and "10.0 / 1.0" in text
    document = report_json(rows, jobs, meta)
    encoded = json.dumps(jsonable(document), allow_nan=False)  # strict JSON: inf spelled as a string
    decoded = json.loads(encoded)
    assert rows_from_json(decoded)[0].rel_error == math.inf
    assert [Row(**r).compiler for r in document["rows"]] == [r.compiler for r in rows]
    assert JobResult.from_json(decoded["jobs"][0]).tasks[0].model == "m"
    assert {s["compiler"] for s in decoded["summary"]} == {"torch.compile", "kiln"}


def test_eager_that_differs_between_rows_is_flagged() -> None:
    rows = merge_rows(_jobs())
    meta = {"device": "cuda", "date": "today", "command": "python -m tools.bench"}
    assert "!" not in render_markdown(rows, meta).split("## Compile seconds")[0]
    for row in rows:
        if row.compiler == "kiln" and row.task == "inference":
            assert row.eager_ms is not None
            row.eager_ms *= 1.5  # eager 1.5x slower in kiln's process than in torch.compile's
    text = render_markdown(rows, meta).split("## Compile seconds")[0]
    assert text.count(" !") == 1 and "eager's own time differed" in text


# ---------------------------------------------------------------- configuration and processes


def test_parse_options() -> None:
    assert parse_tasks("infer,train") == ("inference", "training")
    with pytest.raises(ValueError, match="unknown mode"):
        parse_tasks("backward")
    assert [c.label for c in parse_compilers("all", "cpu")] == ["torch.compile", "kiln"]
    assert len(parse_compilers("all", "cuda")) == 4
    assert parse_compilers("eager", "cpu") == (EAGER,)
    with pytest.raises(ValueError, match="CUDA graphs"):
        parse_compilers("kiln-ro", "cpu")
    with pytest.raises(ValueError, match="unknown compiler"):
        parse_compilers("tvm", "cpu")


def test_model_selection() -> None:
    quick = [s.name for s in select_models("cpu", quick=True)]
    assert "mlp" in quick and "bert_base" not in quick
    assert [s.name for s in select_models("cpu", ("mlp",))] == ["mlp"]  # a model name wins over its family
    assert {s.name for s in select_models("cpu", ("conv",))} == {"convnet_bn", "resnet_tiny"}
    assert "resnet50" in [s.name for s in select_models("cuda")]
    with pytest.raises(ValueError, match="unknown model"):
        select_models("cpu", ("alexnet",))
    with pytest.raises(ValueError, match="runs only on"):
        select_models("cpu", ("resnet50",))


def test_plan_gives_each_compiler_fresh_caches(tmp_path: Path) -> None:
    config = BenchConfig(compilers=(COMPILERS["torch.compile"], COMPILERS["kiln"], EAGER))
    planned = plan_jobs(config, select_models("cpu", ("mlp", "pointwise_chain")), tmp_path, tmp_path / "logs")
    phases = [(p.job.model, p.job.compiler.label, p.job.phase) for p in planned]
    assert phases[:5] == [
        ("mlp", "torch.compile", "cold"), ("mlp", "torch.compile", "warm"),
        ("mlp", "kiln", "cold"), ("mlp", "kiln", "warm"), ("mlp", "eager", "cold"),
    ]
    assert planned[0].cache_dir == planned[1].cache_dir != planned[2].cache_dir
    env = job_environment(planned[2], config, base={"PYTHONPATH": "/elsewhere", "KILN_CACHE_DIR": "/old"})
    assert env["KILN_CACHE_DIR"].startswith(str(planned[2].cache_dir)) and Path(env["KILN_CACHE_DIR"]).is_dir()
    assert env["TORCHINDUCTOR_CACHE_DIR"] != env["KILN_CACHE_DIR"]
    assert env["OMP_NUM_THREADS"] == "2" and "/elsewhere" in env["PYTHONPATH"]
    assert Job.from_json(json.loads(json.dumps(planned[0].job.to_json()))) == planned[0].job


def _planned(tmp_path: Path) -> PlannedJob:
    job = Job("mlp", "cpu", ("inference", "training"), COMPILERS["kiln"], "cold", TINY_MEASURE)
    return PlannedJob(job, tmp_path / "cache", tmp_path / "job.log")


def test_crashed_process_fails_its_rows_with_stderr(tmp_path: Path) -> None:
    crash = [sys.executable, "-c", "import sys; print('Segmentation fault in kernel_0', file=sys.stderr); sys.exit(139)"]
    (result,) = run_planned(_planned(tmp_path), BenchConfig(), command=crash)
    assert [t.status for t in result.tasks] == [FAILED, FAILED]
    assert all(t.stage == "process" and "Segmentation fault in kernel_0" in t.error for t in result.tasks)
    assert all(t.speedup is None for t in result.tasks)


def test_hung_process_times_out(tmp_path: Path) -> None:
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    (result,) = run_planned(_planned(tmp_path), BenchConfig(timeout_s=1.0), command=hang)
    assert all(t.status == FAILED and t.error.startswith("TimeoutError") for t in result.tasks)


def test_command_line_defaults_and_merging(tmp_path: Path) -> None:
    from tools.bench.cli import build_parser, config_from_args, merge_documents, write_outputs

    quick = config_from_args(build_parser().parse_args(["--quick", "--device", "cpu"]))
    assert quick.quick and not quick.warm and quick.measure == MeasureConfig.quick() and quick.timeout_s == 300
    full = config_from_args(build_parser().parse_args(["--device", "cpu", "--modes", "train", "--min-time", "5"]))
    assert full.warm and full.tasks == ("training",) and full.measure.min_time_s == 5
    jobs = _jobs()
    meta = {"device": "cpu", "command": "a"}
    first = json.loads(json.dumps(jsonable(report_json(merge_rows(jobs[:2]), jobs[:2], meta))))
    second = json.loads(json.dumps(jsonable(report_json(merge_rows(jobs[2:]), jobs[2:], dict(meta, command="b")))))
    merged = merge_documents([first, second])
    assert {row["compiler"] for row in merged["rows"]} == {"torch.compile", "kiln"}
    assert merged["meta"]["command"] == "a ; b"
    json_path, md_path, _ = write_outputs(merged, tmp_path, "merged")
    assert json_path.exists() and "## Summary" in md_path.read_text()


def test_plot_marks_failures(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from tools.bench.plot import plot_speedups

    path = tmp_path / "speedups.png"
    assert plot_speedups(merge_rows(_jobs()), path, "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paired_timing_measures_a_known_ratio() -> None:
    import time

    from tools.bench.timing import calls_per_block, paired_timing

    config = MeasureConfig(warmup_calls=2, rounds=4, min_time_s=0.1, min_reps=8, max_reps=400)
    timing = paired_timing(lambda: time.sleep(0.03), lambda: time.sleep(0.01), "cpu", config)
    assert timing.eager.count == timing.compiled.count >= 8
    # A sleep overshoots on a loaded machine (CI runs two test workers; with 8 and 4 ms sleeps a busy
    # machine measured 1.18x): sleeps of 30 and 10 ms stay above 1.3x with up to 20 ms of overshoot.
    # The bounds only rule out a swapped or unpaired measurement (0.33x, 1x), not noise.
    assert 1.3 < timing.speedup < 4.0 and len(timing.round_speedups) == 4
    assert timing.eager.median >= 30.0  # milliseconds, never less than the sleep
    assert calls_per_block(1000.0, config) == 2  # slow calls: the minimum count decides
    assert calls_per_block(0.001, config) == 100  # fast calls: capped at max_reps / rounds


def test_unreadable_result_fails_its_rows(tmp_path: Path) -> None:
    torn = [sys.executable, "-c", "import sys; open(sys.argv[2], 'w').write('{\"model\": ')"]
    (result,) = run_planned(_planned(tmp_path), BenchConfig(), command=torn)
    assert all(t.status == FAILED and "unreadable worker result" in t.error for t in result.tasks)


def test_rounding_noise_on_a_zero_gradient_is_not_an_error() -> None:
    # The gradient of an attention key bias is exactly zero in exact arithmetic; eager and a compiler
    # both produce rounding noise there. Other tensors still decide the verdict.
    noise_eager, noise_compiled = 1e-9 * torch.randn(128), 1e-9 * torch.randn(128)
    values = torch.randn(256)
    eager = {"grad.key.bias": noise_eager, "grad.value.weight": values}
    assert accuracy.relative_error(noise_compiled, noise_eager) > 0.5  # without a floor: "100% wrong"
    assert accuracy.verdict({"grad.key.bias": noise_compiled, "grad.value.weight": values.clone()}, eager).passed
    wrong = {"grad.key.bias": noise_compiled, "grad.value.weight": values * 1.1}
    assert not accuracy.verdict(wrong, eager).passed


def test_end_to_end_eager_calibration_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The whole pipeline once: command line, a real worker subprocess, JSON, markdown (no compiler)."""
    from tools.bench.cli import main

    argv = ["--device", "cpu", "--models", "softmax_layernorm", "--modes", "infer", "--compilers", "eager",
            "--quick", "--min-time", "0.05", "--output-dir", str(tmp_path)]
    assert main(argv) == 0
    document = json.loads(next(tmp_path.glob("bench-cpu-*.json")).read_text())
    (row,) = document["rows"]
    assert row["status"] == PASSED, row["error"]
    assert row["rel_error"] == 0.0 and row["speedup"] > 0 and row["cold_compile_s"] is not None
    assert document["jobs"][0]["environment"]["cpu_threads"] == "2"
    assert "| softmax_layernorm | inference |" in capsys.readouterr().out
    assert next(tmp_path.glob("bench-cpu-*.md")).read_text().startswith("# Kiln benchmark: cpu")


def test_thread_sweep_table_and_parsing() -> None:
    from tools.bench.sweep import parse_threads, render_sweep, sweep_lines

    assert parse_threads("1, 4,8,16,4") == (1, 4, 8, 16)
    for bad in ("", "0", "two", "1,-4"):
        with pytest.raises(ValueError, match="--threads"):
            parse_threads(bad)
    jobs = _jobs()
    meta = {"device": "cpu", "date": "2026-01-01 00:00 UTC", "host": "h", "command": "c"}
    document = json.loads(json.dumps(jsonable(report_json(merge_rows(jobs), jobs, meta))))
    lines = sweep_lines([(1, document), (8, document)])
    assert [(line.threads, line.compiler) for line in lines] == [
        (1, "torch.compile"), (1, "kiln"), (8, "torch.compile"), (8, "kiln")
    ]
    kiln = lines[1]
    assert kiln.passed == 1 and kiln.total == 2 and kiln.slowest is not None and kiln.slowest.task == "inference"
    text = render_sweep([(1, document), (8, document)], "python -m tools.bench --threads 1,8")
    # On the row both passed Kiln is 4x over eager and torch.compile 2x: Kiln / torch.compile = 2.
    assert "| 8 | kiln | 1/2 | 4.00x over 1 | 2.00x | 2.00x | m/inference 4.00x |" in text


def test_thread_sweep_compares_the_compilers_times_as_well_as_their_speedups() -> None:
    """Eager timed next to torch.compile took 4 ms, next to Kiln 2 ms: torch.compile's 4x over eager
    against Kiln's 2.5x reads as Kiln 0.62x torch.compile's, while Kiln's step (0.8 ms) is faster than
    torch.compile's (1.0 ms): the time column says 1.25x."""
    from tools.bench.sweep import render_sweep

    jobs = []
    for compiler, eager_ms, compiled_ms in (("torch.compile", 4.0, 1.0), ("kiln", 2.0, 0.8)):
        job = JobResult("m", compiler, "cold", "cpu")
        task = _task("m", "inference", compiler, "cold", eager_ms / compiled_ms, 1.0)
        task.eager_ms, task.compiled_ms = eager_ms, compiled_ms
        job.tasks.append(task)
        jobs.append(job)
    meta = {"device": "cpu", "date": "2026-01-01 00:00 UTC", "host": "h", "command": "c"}
    document = json.loads(json.dumps(jsonable(report_json(merge_rows(jobs), jobs, meta))))
    text = render_sweep([(4, document)], "python -m tools.bench --threads 4")
    assert "| 4 | kiln | 1/1 | 2.50x over 1 | 0.62x | 1.25x | m/inference 2.50x |" in text


def test_end_to_end_thread_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two thread counts: one report per count (each worker really ran with it) and the sweep table."""
    from tools.bench.cli import main

    argv = ["--device", "cpu", "--models", "softmax_layernorm", "--modes", "infer", "--compilers", "eager",
            "--quick", "--min-time", "0.05", "--threads", "1,2", "--output-dir", str(tmp_path)]
    assert main(argv) == 0
    threads = sorted(
        json.loads(path.read_text())["jobs"][0]["environment"]["cpu_threads"] for path in tmp_path.glob("bench-cpu-t*.json")
    )
    assert threads == ["1", "2"]
    assert "## CPU thread sweep" in next(tmp_path.glob("sweep-cpu-*.md")).read_text()
    assert "| 2 | eager |" in capsys.readouterr().out


def test_end_to_end_thread_sweep_in_one_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A same-process sweep: one worker for the model ran both counts; still one report per count."""
    from tools.bench.cli import main

    argv = ["--device", "cpu", "--models", "softmax_layernorm", "--modes", "infer", "--compilers", "eager",
            "--quick", "--min-time", "0.05", "--threads", "2,1", "--process-mode", "same", "--output-dir", str(tmp_path)]
    assert main(argv) == 0
    documents = {int(path.name.split("-t")[1].split("-")[0]): json.loads(path.read_text()) for path in tmp_path.glob("bench-cpu-t*.json")}
    assert sorted(documents) == [1, 2]
    for threads, document in documents.items():
        (job,) = document["jobs"]
        assert job["threads"] == threads and job["environment"]["cpu_threads"] == str(threads)
    assert len(list(tmp_path.glob("*-logs/*.log"))) == 1  # one worker process
    assert "| 1 | eager |" in capsys.readouterr().out
