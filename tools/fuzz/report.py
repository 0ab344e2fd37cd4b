"""What a found failure becomes: a signature (for deduplication), a likely owner, a pytest file, a note.

The signature is the verdict kind, the set of grammar rules in the *shrunk* program, its input
dtypes and non-trivial layouts, its mode, and for exceptions the innermost exception type: two
failures with one signature are taken to be one bug. The owner is guessed from the triage ladder
(the frontend's own: backend "eager" = capture only, "aot_eager" = + aotgrad, then the C++ and the
Triton kernels): the first rung that fails names the stage.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from tools.fuzz.program import Program, render

NARROW_INTS = ("uint8", "int8", "int16")


def innermost_error(detail: str) -> str:
    """The last ``SomeError: message`` in an exception text, with numbers and generated names blanked."""
    matches = list(re.finditer(r"\b(\w+(?:Error|Exception|Interrupt)): ", detail))
    if not matches:
        return detail.splitlines()[0][:80] if detail else ""
    last = matches[-1]
    tail = detail[last.end() : last.end() + 80].split(" While executing")[0].split("\n")[0]
    tail = re.sub(r"\b[talp]\d+(_\d+)?\b", "v", tail)
    return f"{last.group(1)}: {re.sub(r'[0-9]+', 'N', tail)}"


def failure_class(kind: str, detail: str) -> str:
    """What two failures of one kind must share to be the same failure: the innermost exception type
    for exceptions, the signal (or exit code) for crashes, nothing else otherwise."""
    if kind in ("kiln_error", "exception_mismatch"):
        return innermost_error(detail).split(":")[0]
    if kind == "crash":
        found = re.search(r"worker died \((signal \w+|exit code -?\d+)\)", detail)
        return found.group(1) if found else "crash"
    return ""


def layout_kinds(program: Program) -> list[str]:
    """The non-trivial input layouts a program uses (transposed, stepped, expanded, overlapping ...)."""
    kinds: set[str] = set()
    per_leaf: dict[str, int] = {}
    for param in program.params:
        per_leaf[param.leaf] = per_leaf.get(param.leaf, 0) + 1
        view = param.view
        for word, kind in (("transpose", "transposed"), ("permute", "permuted"), ("expand", "expanded"),
                           ("as_strided", "self_overlapping"), ("::", "stepped"), ("1:-1", "offset"),
                           ("clone()", "activation")):
            if word in view:
                kinds.add(kind)
    if any(count > 1 for count in per_leaf.values()):
        kinds.add("aliased_inputs")
    if any(leaf.channels_last for leaf in program.leaves):
        kinds.add("channels_last")
    return sorted(kinds)


def signature(program: Program, kind: str, detail: str) -> str:
    """The deduplication key of a shrunk failing program."""
    parts = [
        kind,
        "ops=" + "+".join(sorted(set(program.ops()))),
        "dtypes=" + "+".join(sorted({leaf.dtype for leaf in program.leaves})),
        "mode=" + program.mode,
    ]
    layouts = layout_kinds(program)
    if layouts:
        parts.append("layouts=" + "+".join(layouts))
    if failure_class(kind, detail):
        parts.append(failure_class(kind, detail))
    return " | ".join(parts)


def signature_id(sig: str) -> str:
    """A short stable name for a signature (file names, headings)."""
    return hashlib.sha1(sig.encode()).hexdigest()[:10]


def known_bug_tags(program: Program, kind: str, where: str) -> list[str]:
    """Which recently hand-found bug classes (fixes in progress) this failure may be an instance of."""
    tags: list[str] = []
    text = " ".join(s.template for s in program.stmts)
    dtypes = {leaf.dtype for leaf in program.leaves} | set(re.findall(r"torch\.(u?int8|int16)\b", text))
    if kind == "mismatch" and dtypes & set(NARROW_INTS):
        tags.append("possibly known: narrow ints (uint8/int8/int16) not wrapping in fused kernels")
    if where.startswith("grads2"):
        tags.append("possibly known: dropped double-backward terms")
    if "aliased_inputs" in layout_kinds(program) and any(s.inplace for s in program.stmts):
        tags.append("possibly known: aliased/overlapping inputs with in-place ops")
    reduced_outputs = {s.args[0] for s in program.stmts if s.op == "reduce_output"}
    if reduced_outputs & set(program.outputs) and kind == "mismatch":
        tags.append("possibly known: __restrict__ aliasing of a value returned and reduced")
    if kind == "mismatch" and any(leaf.dtype == "bfloat16" and leaf.fill == "special" for leaf in program.leaves):
        tags.append("on the triton target, possibly Triton's interpreter: it reads bfloat16 subnormals as 0 "
                    "(GPUs keep them; check the input at the position named)")
    indexing = ("gather", "take_along", "scatter", "index", "embedding")
    if kind in ("exception_mismatch", "crash") and any(s.may_raise and s.op.startswith(indexing) for s in program.stmts):
        tags.append("possibly known: missing bounds checks")
    return tags


def owner_guess(triage: dict[str, str]) -> str:
    """The stage at fault from the triage ladder's verdict kinds per target."""
    def bad(target: str) -> bool:
        return triage.get(target, "ok") != "ok"

    if bad("eager"):
        return "capture"
    if bad("aot_eager"):
        return "aotgrad"
    if bad("cuda") and not bad("cpp") and not bad("triton"):
        return "codegen_triton on a GPU (its interpreted kernels agree with eager)"
    if "triton" in triage and "cpp" in triage:
        if bad("cpp") and bad("triton"):
            return "inductor_ir (lowering / scheduler)"
        if bad("cpp"):
            return "codegen_cpp"
        if bad("triton"):
            return "codegen_triton"
        return "not reproduced by the ladder (flaky or order-dependent?)"
    return "inductor_ir or a code generator"


@dataclass(frozen=True)
class Finding:
    """One distinct failure, shrunk."""

    sig: str
    kind: str
    where: str
    detail: str
    target: str
    program: Program
    original_stmts: int
    triage: dict[str, str]

    @property
    def ident(self) -> str:
        """The short name of the signature."""
        return signature_id(self.sig)


_TRITON_PATCH = '''
def _triton_on_cpu(monkeypatch):
    """Make the inductor backend compile CPU graphs with codegen_triton (run under TRITON_INTERPRET=1)."""
    import codegen_triton
    from frontend.backends import inductor as inductor_backend

    def triton_on_cpu(device_type, config):
        options = codegen_triton.TritonBackend.parse_options(config.kernel_backend_options("cuda"))
        return codegen_triton.TritonBackend("cpu", options)

    monkeypatch.setattr(inductor_backend, "load_kernel_backend", triton_on_cpu)
'''


def pytest_source(finding: Finding) -> str:
    """A standalone pytest file reproducing `finding` (it fails until the bug is fixed)."""
    docstring = (
        f'"""Kiln fuzz finding {finding.ident}: {finding.kind} on the {finding.target} target ({finding.where}).\n\n'
        f"Signature: {finding.sig}\n"
        f"Shrunk from {finding.original_stmts} to {len(finding.program.stmts)} statements (seed {finding.program.seed}).\n"
        f"Triage ladder: {', '.join(f'{t}={k}' for t, k in finding.triage.items())} -> {owner_guess(finding.triage)}\n\n"
        + "\n".join("    " + line if i else line for i, line in enumerate(finding.detail[:1500].replace('"""', "'''").splitlines()))
        + '\n"""\n'
    )
    triton = finding.target == "triton"
    lines = [
        "",
        "",
        f"def test_fuzz_{finding.ident}({'monkeypatch' if triton else ''}):",
        "    import frontend",
        "",
    ]
    if triton:
        lines.append("    _triton_on_cpu(monkeypatch)")
    if finding.target == "cuda":
        lines += ["    import pytest", "", "    if not torch.cuda.is_available():", '        pytest.skip("needs a CUDA device")']
    lines.append('    compiled = frontend.compile(program, options={"fallback_to_eager": False})')
    if finding.kind == "exception_mismatch":
        lines += [
            "    import pytest",
            "",
            "    with pytest.raises(Exception) as eager_error:",
            "        run(program, make_inputs, MODE, autocast=AUTOCAST)",
            "    with pytest.raises(eager_error.type):",
            "        run(compiled, make_inputs, MODE, autocast=AUTOCAST)",
        ]
    else:
        lines += [
            "    # twice at the inputs' own sizes, then at grown sizes, then in another memory layout",
            "    for grow, relayout in [(0, False), (0, False), *((g, False) for g in GROWS), *([(0, True)] if RELAYOUT else [])]:",
            "        expected = run(program, make_inputs, MODE, autocast=AUTOCAST, grow=grow, relayout=relayout)",
            "        actual = run(compiled, make_inputs, MODE, autocast=AUTOCAST, grow=grow, relayout=relayout)",
            "        assert_matches(expected, actual)",
        ]
    device = '\nDEVICE = "cuda"  # inputs and autocast on the GPU\n' if finding.target == "cuda" else ""
    return "# ruff: noqa\n" + docstring + render(finding.program) + device + (_TRITON_PATCH if triton else "") + "\n".join(lines) + "\n"


def write_test(finding: Finding, folder: Path) -> Path:
    """Write the pytest file of `finding` into `folder`; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"test_fuzz_{finding.ident}.py"
    path.write_text(pytest_source(finding))
    return path


def markdown(finding: Finding, test_path: Path | None) -> str:
    """A findings-file section: signature, verdict, triage, owner guess, known-bug tags, the program."""
    from tools.fuzz.program import render_body

    tags = known_bug_tags(finding.program, finding.kind, finding.where)
    lines = [
        f"### {finding.ident}: {finding.kind} ({finding.target}, {finding.where})",
        "",
        f"- signature: `{finding.sig}`",
        f"- triage: {', '.join(f'{t}={k}' for t, k in finding.triage.items())}; likely owner: **{owner_guess(finding.triage)}**",
    ]
    if tags:
        lines.append(f"- tags: {'; '.join(tags)}")
    if test_path is not None:
        lines.append(f"- test: `{test_path}`")
    lines += ["- eager vs Kiln: " + finding.detail[:800].replace("\n", " "), "", "```python", render_body(finding.program).rstrip(), "```", ""]
    return "\n".join(lines) + "\n"


def summarize(records: list[dict[str, object]]) -> str:
    """A Markdown table of findings (findings.jsonl records): one row per finding, by owner then kind."""
    rows = []
    for record in records:
        program = Program.from_json(record["program"])  # type: ignore[arg-type]
        triage = record.get("triage") or {}
        owner = owner_guess(triage)  # type: ignore[arg-type]
        tags = "; ".join(t.removeprefix("possibly known: ") for t in known_bug_tags(program, str(record["kind"]), str(record["where"])))
        rows.append((owner, str(record["kind"]), str(record["id"]), str(record["target"]), " ".join(program.ops()), tags))
    rows.sort()
    lines = ["| owner (guess) | kind | id | found on | ops | possibly known |", "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {' | '.join(row)} |" for row in rows]
    return "\n".join(lines) + "\n"
