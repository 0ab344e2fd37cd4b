"""A fixed-seed slice of the differential fuzzer, run in CI: any mismatch with eager fails.

Each case generates the program of one seed (`tools.fuzz.generator`), runs it eagerly, in float64
and through Kiln, and compares (`tools.fuzz.compare`). A failure message holds the program's source:
paste it into a file, or run ``python -m tools.fuzz check SEED`` and ``python -m tools.fuzz --seed SEED
--programs 1`` to shrink it (docs/testing.md). Seeds of known, not yet fixed, bugs are listed in
KNOWN with the bug: they run as non-strict xfails, so a fix shows up as XPASS (then drop the entry).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.fuzz.execute import check
from tools.fuzz.generator import GenConfig, generate
from tools.fuzz.program import render_body

ROOT = Path(__file__).resolve().parent.parent

CPP_SEEDS = range(500_000, 500_036)
TRITON_SEEDS = range(600_000, 600_008)
CONFIG = GenConfig(max_stmts=8)

KNOWN: dict[tuple[str, int], str] = {}
"""(target, seed) -> the known bug that seed hits; generator changes change the programs, so this
table is re-derived whenever tools/fuzz's grammar changes."""


def _cases(target: str, seeds: range) -> list[pytest.param]:
    cases = []
    for seed in seeds:
        marks = [pytest.mark.xfail(reason=KNOWN[target, seed], strict=False)] if (target, seed) in KNOWN else []
        cases.append(pytest.param(target, seed, marks=marks, id=f"{target}-{seed}"))
    return cases


@pytest.mark.parametrize(("target", "seed"), _cases("cpp", CPP_SEEDS) + _cases("triton", TRITON_SEEDS))
def test_fuzz_slice(target: str, seed: int) -> None:
    if target == "triton" and os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 (set by nox)")
    program = generate(seed, CONFIG)
    verdict = check(program, target)
    assert verdict.ok, (
        f"{verdict.kind} at {verdict.where}: {verdict.detail}\n\nprogram (seed {seed}, target {target}):\n{render_body(program)}"
    )
