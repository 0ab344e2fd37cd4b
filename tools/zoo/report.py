"""The zoo's printed table, summary and Markdown, from the results `tools.zoo.run` produces."""

from __future__ import annotations

from typing import Any

from tools.zoo.verdicts import worse_than_dynamo

COMPILERS = (("dynamo", "Dynamo"), ("kiln", "Kiln"))


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def _cell(result: dict[str, Any], compiler: str) -> str:
    """``graphs/breaks/ops first call, graphs total, recompiles, one-graph storm correct`` in one cell."""
    data = result.get(compiler)
    if data is None:
        return "-"
    if data.get("error"):
        return "error: " + data["error"].splitlines()[0][:60]
    flags = ("1g " if data["one_graph"] else "") + ("STORM " if data["storm"] else "") + ("" if data["correct"] else "WRONG")
    return (f"{data['first_call_graphs']}/{data['first_call_breaks']}/{data['first_call_ops']} "
            f"g{data['graphs']} r{data['recompiles']} {flags}".strip())


def table(results: list[dict[str, Any]]) -> str:
    """One Markdown row per model: Kiln and Dynamo side by side, and why Kiln is worse where it is."""
    lines = ["| model | family | Dynamo | Kiln | Kiln s (4 calls) | Dynamo s | Kiln worse |",
             "|---|---|---|---|---:|---:|---|"]
    for result in results:
        if result.get("error"):
            lines.append(f"| {result['model']} | {result.get('family', '')} | - | - | | | "
                         f"not run: {result['error'].splitlines()[0][:80]} |")
            continue
        worse = "; ".join(kind for kind, _ in worse_than_dynamo(result))
        lines.append(f"| {result['model']} | {result['family']} | {_cell(result, 'dynamo')} | {_cell(result, 'kiln')} "
                     f"| {_seconds(result, 'kiln')} | {_seconds(result, 'dynamo')} | {worse} |")
    return "\n".join(lines)


def _seconds(result: dict[str, Any], compiler: str) -> str:
    data = result.get(compiler)
    if not data or not data.get("calls"):
        return ""
    return f"{sum(c['seconds'] for c in data['calls']):.1f}"


def summary(results: list[dict[str, Any]]) -> str:
    """Counts over the models both compilers ran: one graph on the first call, no storm, correct."""
    ran = [r for r in results if not r.get("error")]
    lines = [f"{len(ran)} models built and ran eagerly ({len(results) - len(ran)} did not: build error, crash or timeout).", "",
             "| | one graph on the first call | no recompile storm | correct | compiled without error |",
             "|---|---:|---:|---:|---:|"]
    for key, label in COMPILERS:
        measured = [r[key] for r in ran if key in r]
        if not measured:
            continue
        n = len(measured)
        one = sum(1 for d in measured if d["one_graph"])
        calm = sum(1 for d in measured if not d["error"] and not d["storm"])
        correct = sum(1 for d in measured if d["correct"])
        clean = sum(1 for d in measured if not d["error"])
        lines.append(f"| {label} | {one}/{n} | {calm}/{n} | {correct}/{n} | {clean}/{n} |")
    default = [r["kiln-default"] for r in ran if "kiln-default" in r]
    if default:
        correct = sum(1 for d in default if d["correct"])
        lines.append(f"| Kiln, default backend (C++ kernels) | | | {correct}/{len(default)} | "
                     f"{sum(1 for d in default if not d['error'])}/{len(default)} |")
    worse = [r for r in ran if worse_than_dynamo(r)]
    if any("dynamo" in r for r in ran):
        lines += ["", f"Kiln worse than Dynamo on {len(worse)} models:"]
        for result in worse:
            for kind, text in worse_than_dynamo(result):
                lines.append(f"- {result['model']} [{kind}]: {text[:300]}")
        lines += ["", "By cause:"]
        for cause, models in worse_by_cause(ran).items():
            lines.append(f"- {cause}: {', '.join(models)}")
    return "\n".join(lines)


def default_backend_failures(results: list[dict[str, Any]]) -> list[str]:
    """Models whose default-backend run failed or differed from eager."""
    out = []
    for result in results:
        data = result.get("kiln-default")
        if data is not None and not data["correct"]:
            out.append(f"{result['model']}: {data['error'] or 'outputs differ from eager'}")
    return out


def _cause(result: dict[str, Any]) -> str:
    """The first break reason (else the guard of a same-shape recompile) behind Kiln's shortfall."""
    kiln = result["kiln"]
    for call in kiln["calls"]:
        for brk in call["breaks"]:
            reason = brk["reason"]
            if "SymIntArrayRef expected to contain only concrete integers" in reason:
                reason = "fake-tensor propagation with symbolic sizes: SymIntArrayRef expected to contain only concrete integers"
            return reason[:150]
        if call["index"] in (1, 2) and call["recompiles"]:
            return "recompile on same shapes: " + call["recompiles"][0].split("this guard failed: ", 1)[-1][:120]
    return "more graphs, no break reported"


def worse_by_cause(results: list[dict[str, Any]]) -> dict[str, list[str]]:
    """cause -> models (with the kinds of shortfall) where Kiln is worse than Dynamo, most models first."""
    groups: dict[str, list[str]] = {}
    for result in results:
        kinds = [kind for kind, _ in worse_than_dynamo(result)]
        if kinds:
            groups.setdefault(_cause(result), []).append(f"{result['model']} ({'+'.join(kinds)})")
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def _mode_cell(data: dict[str, Any] | None) -> str:
    """ok / WRONG / error, with the first-call graph/break counts and where the first wrong value is."""
    if data is None:
        return "-"
    wrong = [c for c in data["calls"] if not c["correct"] and not c.get("error")]
    if data.get("error"):
        then = f"WRONG on call {wrong[0]['index'] + 1} ({wrong[0].get('wrong_at', '')[:60]}), then " if wrong else ""
        return then + "error: " + data["error"].splitlines()[0][:70]
    counts = f"{data['first_call_graphs']}/{data['first_call_breaks']} g{data['graphs']} r{data['recompiles']}"
    if wrong:
        return f"WRONG {counts}: {wrong[0].get('wrong_at', '').split(';')[-1].strip()[:90]}"
    return f"ok {counts}" + (" STORM" if data["storm"] else "")


def mode_table(results: list[dict[str, Any]], compilers: list[str]) -> str:
    """Training / autocast runs: one row per model, one column per compiler (ok, WRONG or error)."""
    lines = ["| model | mode | " + " | ".join(compilers) + " | notes |", "|---|---|" + "---|" * len(compilers) + "---|"]
    for result in results:
        if result.get("error"):
            lines.append(f"| {result['model']} | {result.get('mode', '')} | " + " | ".join("-" for _ in compilers)
                         + f" | not run: {result['error'].splitlines()[0][:80]} |")
            continue
        notes = []
        if result.get("train_in_eval_mode"):
            notes.append("random in training mode: trained in eval mode")
        if result.get("no_float64_reference"):
            notes.append("no float64 reference: " + result["no_float64_reference"][:60])
        cells = " | ".join(_mode_cell(result.get(c)) for c in compilers)
        lines.append(f"| {result['model']} | {result.get('mode', 'infer')} | {cells} | {'; '.join(notes)} |")
    return "\n".join(lines)


def mode_summary(results: list[dict[str, Any]], compilers: list[str]) -> str:
    """Per compiler: how many models were right, wrong (on some call), raised, or stormed; a model
    wrong on one call that raised on a later one counts in both."""
    ran = [r for r in results if not r.get("error")]
    lines = [f"{len(ran)} models built and ran eagerly ({len(results) - len(ran)} did not).", "",
             "| compiler | ok | wrong | error | storm |", "|---|---:|---:|---:|---:|"]
    for compiler in compilers:
        data = [r[compiler] for r in ran if compiler in r]
        wrong = sum(1 for d in data if any(not c["correct"] and not c.get("error") for c in d["calls"]))
        lines.append(f"| {compiler} | {sum(1 for d in data if d['correct'])} | {wrong} | "
                     f"{sum(1 for d in data if d['error'])} | {sum(1 for d in data if d['storm'])} |")
    return "\n".join(lines)
