"""Verdicts over a model's results: where Kiln is worse than Dynamo, and against recorded expectations.

Known gaps (tools/zoo/known_gaps.toml) name models where Kiln is known to be worse than Dynamo, each
with the kinds of shortfall it is excused for and why::

    [gaps.mamba]
    kinds = ["graphs"]
    reason = "..."

Kinds: "graphs" (more graphs or graph breaks than expected or than Dynamo), "storm", "wrong",
"error". Expectations (tools/zoo/expectations.json) record, per model, Kiln's graph and break counts
of a good run; a later run with more is a regression unless a known gap excuses it.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
KNOWN_GAPS = HERE / "known_gaps.toml"
EXPECTATIONS = HERE / "expectations.json"
GAP_KINDS = ("graphs", "storm", "wrong", "error")
COUNTED = ("first_call_graphs", "first_call_breaks", "graphs", "breaks")
"""The Kiln counts an expectation records (more of any is worse)."""


def load_known_gaps(path: Path = KNOWN_GAPS) -> dict[str, dict[str, Any]]:
    """model -> {"kinds": [...], "reason": ...}; raises on an entry without a reason or with an unknown kind."""
    gaps: dict[str, dict[str, Any]] = tomllib.loads(path.read_text()).get("gaps", {}) if path.exists() else {}
    for name, entry in gaps.items():
        unknown = set(entry.get("kinds", [])) - set(GAP_KINDS)
        if unknown or not entry.get("reason") or not entry.get("kinds"):
            raise ValueError(f"{path}: gap {name!r} needs `kinds` (some of {GAP_KINDS}) and a `reason`; got {entry}")
    return gaps


def load_expectations(path: Path = EXPECTATIONS) -> dict[str, dict[str, int]]:
    """model -> {count name: value} from the recorded file (empty when there is none)."""
    return json.loads(path.read_text())["models"] if path.exists() else {}  # type: ignore[no-any-return]


def expectation_of(result: dict[str, Any]) -> dict[str, int] | None:
    """The counts of a Kiln result worth recording (None when Kiln did not run cleanly)."""
    kiln = result.get("kiln")
    if not kiln or kiln.get("error"):
        return None
    return {key: int(kiln[key]) for key in COUNTED}


def kiln_problems(result: dict[str, Any], expected: dict[str, int] | None) -> list[tuple[str, str]]:
    """(kind, text) of each way Kiln's run of this model is bad on its own or against `expected`."""
    if result.get("error"):
        return [("error", str(result["error"]))]
    kiln = result.get("kiln") or {}
    problems: list[tuple[str, str]] = []
    if kiln.get("error"):
        problems.append(("error", kiln["error"]))
    if kiln.get("storm"):
        problems.append(("storm", _storm_text(kiln)))
    if not kiln.get("error") and not kiln.get("correct"):
        worst = max((c.get("max_error", 0.0) for c in kiln.get("calls", [])), default=0.0)
        problems.append(("wrong", f"outputs differ from eager (max scaled error {worst:.3g})"))
    if expected is not None and not kiln.get("error"):
        worse = [f"{key} {kiln[key]} > {expected[key]}" for key in COUNTED if kiln[key] > expected[key]]
        if worse:
            problems.append(("graphs", "worse than the recorded expectation: " + ", ".join(worse)))
    return problems


def _storm_text(result: dict[str, Any]) -> str:
    for call in result.get("calls", []):
        if call["index"] in result.get("same_shape", (1, 2)) and call["recompiles"]:
            return f"recompiled on call {call['index'] + 1} (same shapes): {call['recompiles'][0]}"
        if call["graph_runs"] == 0:
            return f"call {call['index'] + 1} ran no compiled graph"
    return "storm"


def worse_than_dynamo(result: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) of each way Kiln is worse than Dynamo on this model (empty when Dynamo did not run)."""
    kiln, dynamo = result.get("kiln"), result.get("dynamo")
    if not kiln or not dynamo or result.get("error"):
        return []
    out: list[tuple[str, str]] = []
    if kiln.get("error") and not dynamo.get("error"):
        return [("error", kiln["error"].splitlines()[0])]
    if kiln.get("error") or dynamo.get("error"):
        return []  # Kiln ran where Dynamo failed: not worse
    if kiln["storm"] and not dynamo["storm"]:
        out.append(("storm", _storm_text(kiln)))
    if not kiln["correct"] and dynamo["correct"]:
        out.append(("wrong", "outputs differ from eager"))
    more = []
    if kiln["first_call_graphs"] > dynamo["first_call_graphs"]:
        more.append(f"first-call graphs {kiln['first_call_graphs']} vs {dynamo['first_call_graphs']}")
    if kiln["breaks"] > dynamo["breaks"]:
        more.append(f"breaks {kiln['breaks']} vs {dynamo['breaks']}")
    if kiln["graphs"] > dynamo["graphs"] and not more:
        more.append(f"graphs {kiln['graphs']} vs {dynamo['graphs']}")
    if more:
        reasons = sorted({b["reason"] + (f" at {b['where']}" if b["where"] else "")
                          for c in kiln["calls"] for b in c["breaks"]})
        out.append(("graphs", "; ".join(more) + (": " + " | ".join(reasons[:3]) if reasons else "")))
    return out


def mode_problems(result: dict[str, Any], compilers: list[str]) -> list[tuple[str, str]]:
    """(kind, text) of each Kiln compiler's wrong result, error or storm in a training / autocast run."""
    if result.get("error"):
        return [("error", str(result["error"]))]
    problems: list[tuple[str, str]] = []
    for compiler in compilers:
        data = result.get(compiler)
        if not data or compiler == "dynamo":
            continue
        wrong = [c for c in data["calls"] if not c["correct"] and not c.get("error")]
        if wrong:
            problems.append(("wrong", f"{compiler}: call {wrong[0]['index'] + 1}: {wrong[0].get('wrong_at', '')}"))
        if data.get("error"):
            problems.append(("error", f"{compiler}: {data['error']}"))
            continue
        if data.get("storm"):
            problems.append(("storm", f"{compiler}: {_storm_text(data)}"))
    return problems
