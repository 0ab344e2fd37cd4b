"""A fixed slice of the model zoo (tools/zoo/), run in CI: capture only, no TorchDynamo.

Each case builds one `transformers` architecture from a tiny config (random weights), calls it four
times through `frontend.compile` with a counting backend (same input twice, new values, a new
shape) and fails on a recompile storm (a recompile on same-shape inputs, or a call that ran no
compiled graph), on outputs that differ from eager, on an error, or on more graphs or graph breaks
than tools/zoo/expectations.json records, unless tools/zoo/known_gaps.toml lists that model with
that kind of shortfall. After an improvement, re-record with
``python -m tools.zoo --slice --no-dynamo --record-expectations`` (docs/zoo.md).

`MODE_SLICE` runs a few models through training steps and bf16 autocast (`--task train`,
`--autocast bf16`) through capture + aotgrad, and fails on a wrong output, loss, gradient or buffer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

from tools.zoo.models import SLICE, TRANSFORMERS_MODELS  # noqa: E402
from tools.zoo.modes import Mode  # noqa: E402
from tools.zoo.verdicts import kiln_problems, load_expectations, load_known_gaps, mode_problems  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

MODE_SLICE = (("llama", Mode("train", "bf16")), ("bert", Mode("train")), ("vit", Mode("infer", "bf16")))
"""(model, mode) pairs run through capture + aotgrad ("kiln-aot"): LLaMA's rotary angles run in an
`autocast(enabled=False)` island inside bf16 autocast; BERT's gradients through every layer; a ViT
under autocast."""

GAPS = load_known_gaps()
EXPECTED = load_expectations()


def test_known_gaps_and_expectations_name_zoo_models() -> None:
    names = {spec.name for spec in TRANSFORMERS_MODELS}
    assert not set(GAPS) - names, f"known_gaps.toml names models the zoo does not have: {sorted(set(GAPS) - names)}"
    missing = [name for name in SLICE if name not in EXPECTED]
    assert not missing, f"no recorded expectation for slice models {missing}: run python -m tools.zoo --slice --no-dynamo --record-expectations"


@pytest.mark.skipif(int(transformers.__version__.split(".")[0]) < 5, reason="the zoo's tiny configs need transformers 5")
@pytest.mark.parametrize("name", SLICE)
def test_zoo_slice(name: str) -> None:
    from tools.zoo.run import run_model

    result = run_model(name, ["kiln"])
    excused = set(GAPS.get(name, {}).get("kinds", []))
    problems = [f"[{kind}] {text}" for kind, text in kiln_problems(result, EXPECTED.get(name)) if kind not in excused]
    assert not problems, f"{name}:\n" + "\n".join(problems) + f"\n\nper call: {result.get('kiln', {}).get('calls')}"


@pytest.mark.skipif(int(transformers.__version__.split(".")[0]) < 5, reason="the zoo's tiny configs need transformers 5")
@pytest.mark.parametrize("name,mode", MODE_SLICE, ids=[f"{n}-{m.label}" for n, m in MODE_SLICE])
def test_zoo_train_autocast_slice(name: str, mode: Mode) -> None:
    from tools.zoo.run import run_model

    result = run_model(name, ["kiln-aot"], mode)
    excused = set(GAPS.get(name, {}).get("kinds", []))
    problems = [f"[{kind}] {text}" for kind, text in mode_problems(result, ["kiln-aot"]) if kind not in excused]
    assert not problems, f"{name} ({mode.label}):\n" + "\n".join(problems)


def test_judge_forgives_rounding_and_flags_wrong_values() -> None:
    import torch

    from tools.zoo.compare import judge

    g = torch.Generator().manual_seed(0)
    exact = torch.randn(64, 64, generator=g, dtype=torch.float64)
    eager = exact.to(torch.bfloat16).float()  # eager's own bf16 rounding
    other_rounding = (exact + exact.abs() * 2e-3 * torch.randn(64, 64, generator=g, dtype=torch.float64)).to(torch.bfloat16).float()
    assert judge({"y": other_rounding}, {"y": eager}, {"y": exact}, 1e-4, torch.bfloat16)[0]
    wrong = eager.clone()
    wrong[3, 5] += 0.3 * max(1.0, float(exact.abs().max()))
    ok, _, where = judge({"y": wrong}, {"y": eager}, {"y": exact}, 1e-4, torch.bfloat16)
    assert not ok and "y" in where and "(3, 5)" in where
    assert not judge({"g": None}, {"g": torch.ones(2)}, None, 1e-4)[0]
    assert judge({"g": None}, {"g": torch.zeros(2)}, None, 1e-4)[0]


def _result(calls: list[dict], graphs: int = 1, breaks: int = 0) -> dict:
    kiln = {"error": "", "calls": calls, "first_call_graphs": graphs, "first_call_breaks": breaks, "graphs": graphs,
            "breaks": breaks, "storm": False, "correct": all(c["correct"] for c in calls)}
    from tools.zoo.verdicts import _storm_text

    kiln["storm"] = any(c["index"] in (1, 2) and c["recompiles"] for c in calls) or any(c["graph_runs"] == 0 for c in calls)
    assert _storm_text(kiln)
    return {"model": "m", "kiln": kiln}


def _call(index: int, runs: int = 1, recompiles: tuple[str, ...] = (), correct: bool = True) -> dict:
    return {"index": index, "graph_runs": runs, "recompiles": list(recompiles), "correct": correct, "max_error": 0.0,
            "breaks": []}


def test_verdicts_flag_storms_wrong_results_and_regressions() -> None:
    calm = _result([_call(0), _call(1), _call(2), _call(3, recompiles=("size changed",))])
    assert kiln_problems(calm, {"first_call_graphs": 1, "first_call_breaks": 0, "graphs": 1, "breaks": 0}) == []
    same_shape_recompile = _result([_call(0), _call(1, recompiles=("guard",)), _call(2), _call(3)])
    assert [kind for kind, _ in kiln_problems(same_shape_recompile, None)] == ["storm"]
    no_graph_ran = _result([_call(0, runs=0), _call(1), _call(2), _call(3)])
    assert [kind for kind, _ in kiln_problems(no_graph_ran, None)] == ["storm"]
    wrong = _result([_call(0), _call(1), _call(2, correct=False), _call(3)])
    assert [kind for kind, _ in kiln_problems(wrong, None)] == ["wrong"]
    more_graphs = _result([_call(0), _call(1), _call(2), _call(3)], graphs=2, breaks=1)
    expected = {"first_call_graphs": 1, "first_call_breaks": 0, "graphs": 2, "breaks": 1}
    assert [kind for kind, _ in kiln_problems(more_graphs, expected)] == ["graphs"]
