"""The fuzzing loop: programs through workers, failures shrunk, triaged, deduplicated and written out.

Per seed and target: a worker generates the program and checks it (`tools.fuzz.worker`). A failure
is shrunk with the same worker as the oracle (a candidate must fail with the same verdict kind,
and for exceptions the same innermost exception type), its signature is looked up among the
findings so far, and a new one is triaged on every rung of the ladder and written as a pytest
file, a JSON line, and a section of the findings Markdown file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.fuzz.generator import GenConfig, describe
from tools.fuzz.pool import Worker
from tools.fuzz.program import Program, used_names
from tools.fuzz.report import Finding, failure_class, innermost_error, markdown, signature, write_test
from tools.fuzz.shrink import shrink

GIVE_UP_AFTER = 20
"""A run whose first this-many seeds all fail in the worker (no CUDA device, a broken install) stops."""


def append_once(text: str, files: Sequence[Path]) -> None:
    """Append `text` to each of `files`, once per file however many of them name it (`--findings-md`
    may point at the run's own findings.md)."""
    for path in dict.fromkeys(f.resolve() for f in files):
        with path.open("a") as handle:
            handle.write(text)


@dataclass
class RunConfig:
    """Options of a fuzzing run (the CLI's flags).

    Attributes:
        programs: programs per target.
        seed: the first seed; program i has seed ``seed + i``.
        targets: Kiln targets to run every program on ("cpp", "triton").
        out_dir: where pytest files, findings.jsonl, summary.json and worker logs go.
        findings_md: a Markdown file to append each new finding to (None: only out_dir/findings.md).
        shrink: shrink failures (off: report them as generated).
        timeout: seconds one program may take in a worker before it counts as a hang.
        shrink_calls: oracle calls per shrink.
        max_minutes: stop starting new programs after this long (0: no limit).
        nice: niceness of the workers.
        kiln_src: a tree whose Kiln packages the workers import instead of the installed ones.
        gen: the generator's options.
    """

    programs: int = 100
    seed: int = 0
    targets: tuple[str, ...] = ("cpp",)
    out_dir: Path = Path("tools/fuzz/found")
    findings_md: Path | None = None
    shrink: bool = True
    timeout: float = 300.0
    shrink_calls: int = 120
    max_minutes: float = 0.0
    nice: int = 10
    kiln_src: Path | None = None
    gen: GenConfig = field(default_factory=GenConfig)


@dataclass
class TargetStats:
    """Counts for one target."""

    programs: int = 0
    seconds: float = 0.0
    kinds: Counter[str] = field(default_factory=Counter)
    failures: int = 0
    duplicates: int = 0

    def per_minute(self) -> float:
        """Programs checked per minute of wall time (generation, eager, float64 and Kiln runs)."""
        return 60.0 * self.programs / self.seconds if self.seconds else 0.0


class Fuzzer:
    """A fuzzing run's state: workers, findings so far, statistics."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.out = config.out_dir
        self.out.mkdir(parents=True, exist_ok=True)
        cache = self.out / ".kiln_cache"
        self.workers = {
            t: Worker(t, cache, self.out / "logs" / f"worker_{t}.log", config.nice, kiln_src=config.kiln_src)
            for t in config.targets
        }
        self.stats = {t: TargetStats() for t in config.targets}
        self.signatures: dict[str, int] = self._known_signatures()
        self.coarse: Counter[str] = Counter()
        self.shrunk: dict[int, tuple[Program, str]] = {}  # seed -> its shrunk program and verdict kind

    def _known_signatures(self) -> dict[str, int]:
        path = self.out / "findings.jsonl"
        known: dict[str, int] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    known[json.loads(line)["signature"]] = 1
        return known

    def close(self) -> None:
        """Stop the workers."""
        for worker in self.workers.values():
            worker.close()

    # ----- the loop -----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Fuzz `config.programs` seeds on every target; returns the summary (also in summary.json)."""
        config = self.config
        started = time.perf_counter()
        try:
            for i in range(config.programs):
                if config.max_minutes and time.perf_counter() - started > 60 * config.max_minutes:
                    print(f"[fuzz] time limit reached after {i} seeds", flush=True)
                    break
                for target in config.targets:
                    self.one(config.seed + i, target)
                if i + 1 >= GIVE_UP_AFTER and all(s.kinds["tool_error"] == i + 1 for s in self.stats.values()):
                    print(f"[fuzz] stopped: the first {i + 1} seeds all failed in the worker (see above)", flush=True)
                    break
        except (KeyboardInterrupt, SystemExit):
            print("[fuzz] stopped; the summary covers the programs run so far", flush=True)
        finally:
            self.close()
        summary = self.summary()
        (self.out / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary

    def one(self, seed: int, target: str) -> None:
        """Generate and check the program of `seed` on `target`; handle a failure."""
        stats = self.stats[target]
        started = time.perf_counter()
        message = {"cmd": "generate", "seed": seed, "target": target, "config": _gen_json(self.config.gen)}
        replies = self.workers[target].request(message, self.config.timeout, replies=2)
        stats.seconds += time.perf_counter() - started
        program = next((Program.from_json(r["program"]) for r in replies if r.get("event") == "program"), None)
        verdict = replies[-1]
        if verdict.get("event") == "error":
            print(f"[fuzz] seed {seed} {target}: worker error\n{verdict.get('detail')}", flush=True)
            stats.kinds["tool_error"] += 1
            return
        stats.programs += 1
        stats.kinds[verdict["kind"]] += 1
        if verdict["kind"] in ("ok", "skipped", "eager_layout_bug", "interpreter_artifact"):
            return
        if program is None:  # the worker died or hung before it sent the program: the seed rebuilds it
            print(f"[fuzz] seed {seed} {target}: {verdict['kind']} before the program was reported "
                  f"(rerun: --programs 1 --seed {seed}): {str(verdict.get('detail', ''))[:300]}", flush=True)
            return
        stats.failures += 1
        print(f"[fuzz] seed {seed} {target}: {verdict['kind']} {verdict.get('where', '')}: {describe(program)}", flush=True)
        self.failure(program, verdict, target)

    # ----- failures -------------------------------------------------------------------------------
    def _same_failure(self, program: Program, verdict: dict[str, Any], target: str) -> Any:
        """The shrinker's oracle: a candidate fails like `program` did: the same verdict kind, the same
        exception type (or crash signal), eager raising or not as it did; and where the failure is an
        exception eager raises, the statement raising it still feeds the outputs (else the candidate
        only shows that Kiln drops dead code)."""
        kind = verdict["kind"]
        error = failure_class(kind, verdict.get("detail", ""))
        eager_raises = self._eager_raises(program, target)

        def fails(candidate: Program) -> bool:
            if eager_raises is None or self._eager_raises(candidate, target) is not eager_raises:
                return False
            if kind == "exception_mismatch":
                live = used_names(candidate)
                if any(s.may_raise and s.out not in live for s in candidate.stmts):
                    return False
            timeout = min(self.config.timeout, 120.0)
            message = {"cmd": "check", "program": candidate.to_json(), "target": target}
            got = self.workers[target].request(message, timeout)[-1]
            return got.get("kind") == kind and failure_class(kind, got.get("detail", "")) == error

        return fails

    def _eager_raises(self, program: Program, target: str) -> bool | None:
        """Whether eager PyTorch raises on `program`, asked in `target`'s worker (None: eager itself
        crashed or hung there, which a parent process running it would not survive)."""
        reply = self.workers[target].request({"cmd": "eager", "program": program.to_json()}, min(self.config.timeout, 120.0))[-1]
        return bool(reply["raises"]) if reply.get("event") == "eager" else None

    def failure(self, program: Program, verdict: dict[str, Any], target: str) -> None:
        """Shrink, deduplicate, triage and write out one failing program."""
        kind = verdict["kind"]
        coarse = coarse_key(target, kind, verdict.get("where", ""), verdict.get("detail", ""))
        if coarse and self.coarse[coarse] >= 2:
            self.stats[target].duplicates += 1
            print(f"[fuzz]   same error as twice before ({coarse}); not shrunk", flush=True)
            return
        if coarse:
            self.coarse[coarse] += 1
        minimal, detail, where = program, verdict.get("detail", ""), verdict.get("where", "")
        earlier = self.shrunk.get(program.seed)
        if earlier is not None and earlier[1] == kind:
            # The same seed failed the same way on another target: if its shrunk program fails here
            # too, the triage already covers this target.
            message = {"cmd": "check", "program": earlier[0].to_json(), "target": target}
            if self.workers[target].request(message, self.config.timeout)[-1].get("kind") == kind:
                self.stats[target].duplicates += 1
                print("[fuzz]   its program shrunk on another target fails here too: not shrunk again", flush=True)
                return
        if self.config.shrink and kind != "hang":
            minimal, shrink_stats = shrink(program, self._same_failure(program, verdict, target), self.config.shrink_calls)
            again = self.workers[target].request({"cmd": "check", "program": minimal.to_json(), "target": target}, self.config.timeout)[-1]
            if again.get("kind") == kind:
                detail, where = again.get("detail", detail), again.get("where", where)
            print(f"[fuzz]   shrunk {len(program.stmts)} -> {len(minimal.stmts)} statements "
                  f"({shrink_stats.calls} runs, {shrink_stats.seconds:.0f}s)", flush=True)
        self.shrunk[program.seed] = (minimal, kind)
        sig = signature(minimal, kind, detail)
        if sig in self.signatures:
            self.signatures[sig] += 1
            self.stats[target].duplicates += 1
            print(f"[fuzz]   duplicate of {sig}", flush=True)
            return
        self.signatures[sig] = 1
        finding = Finding(sig, kind, where, detail, target, minimal, len(program.stmts), self.triage(minimal))
        path = write_test(finding, self.out)
        section = markdown(finding, path)
        append_once(section, [self.out / "findings.md", *([self.config.findings_md] if self.config.findings_md else [])])
        record = {"signature": sig, "id": finding.ident, "kind": kind, "where": where, "target": target,
                  "detail": detail[:2000], "triage": finding.triage, "program": minimal.to_json(), "test": str(path)}
        with (self.out / "findings.jsonl").open("a") as handle:
            handle.write(json.dumps(record) + "\n")
        print(f"[fuzz]   NEW {finding.ident}: {sig} -> {path}", flush=True)

    def triage(self, program: Program) -> dict[str, str]:
        """The verdict kind on each rung: eager (capture), aot_eager (aotgrad), cpp, triton (and cuda,
        where a worker runs on a GPU)."""
        kinds: dict[str, str] = {}
        worker = self.workers.get("cuda") or next(iter(self.workers.values()))
        rungs = ("eager", "aot_eager", "cpp", "triton", "cuda") if "cuda" in self.workers else ("eager", "aot_eager", "cpp", "triton")
        for target in rungs:
            message = {"cmd": "check", "program": program.to_json(), "target": target}
            kinds[target] = worker.request(message, min(self.config.timeout, 180.0))[-1].get("kind", "error")
        return kinds

    def summary(self) -> dict[str, Any]:
        """Per target: programs, verdict kinds, failures, duplicates, seconds, programs per minute."""
        return {
            "seed": self.config.seed,
            "kiln_src": str(self.config.kiln_src or "installed"),
            "targets": {
                t: {"programs": s.programs, "kinds": dict(s.kinds), "failures": s.failures, "duplicates": s.duplicates,
                    "seconds": round(s.seconds, 1), "programs_per_minute": round(s.per_minute(), 2)}
                for t, s in self.stats.items()
            },
            "distinct_findings": len(self.signatures),
        }


STRUCTURAL = ("dtype", "shape", "requires_grad", "eager computes", "None in", "values from eager")


def coarse_key(target: str, kind: str, where: str, detail: str) -> str:
    """A key that is the same for failures that are surely one bug before shrinking: the same
    exception, or the same structural difference (dtype, shape, requires_grad, missing gradients);
    "" for value mismatches, which only shrinking can tell apart."""
    if kind == "mismatch":
        if not any(word in detail for word in STRUCTURAL):
            return ""
        return f"{target}|mismatch|{where.split('[')[0]}|{re.sub(r'[0-9]+', 'N', detail.split(':', 1)[-1])}"
    return f"{target}|{kind}|{failure_class(kind, detail) if kind in ('crash', 'hang') else innermost_error(detail)}"


def _gen_json(gen: GenConfig) -> dict[str, Any]:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(gen).items()}


def load_findings(out_dirs: list[Path]) -> list[dict[str, Any]]:
    """The findings.jsonl records of `out_dirs` (a run that found nothing wrote none)."""
    paths = [folder / "findings.jsonl" for folder in out_dirs]
    return [json.loads(line) for path in paths if path.exists() for line in path.read_text().splitlines() if line.strip()]


def recheck(out_dirs: list[Path], kiln_src: Path | None, nice: int = 10, timeout: float = 300.0) -> list[dict[str, Any]]:
    """Run every finding recorded in `out_dirs` (findings.jsonl) again on its target: which still fail.

    Returns one record per finding: its id, signature, target, the kind it had and the kind it has now.
    """
    records = load_findings(out_dirs)
    cache = out_dirs[0] / ".kiln_cache"
    workers: dict[str, Worker] = {}
    results = []
    try:
        for record in records:
            target = record["target"]
            if target not in workers:
                log = out_dirs[0] / "logs" / f"recheck_{target}.log"
                workers[target] = Worker(target, cache, log, nice, kiln_src=kiln_src)
            message = {"cmd": "check", "program": record["program"], "target": target}
            now = workers[target].request(message, timeout)[-1].get("kind", "error")
            results.append({"id": record["id"], "signature": record["signature"], "target": target,
                            "was": record["kind"], "now": now})
            print(f"{record['id']}  {target:6}  {record['kind']:>18} -> {now:<18}  {record['signature']}", flush=True)
    finally:
        for worker in workers.values():
            worker.close()
    return results
