"""Triton kernels assert indirect indices in range and integer divisors nonzero; under the interpreter
a failed assert raises what eager raises (IndexError, RuntimeError), never reads out of bounds.

The cases (triton_check_cases.py) run in a child process with TRITON_INTERPRET=1, so a regression
that crashes the interpreter fails its case instead of killing pytest: pointwise, persistent and
looped kernels, scatter and index_put reductions, lanes outside a mask left unchecked, integer
division (float division stays inf/nan; a constant 0 divisor of an empty block divides nothing: fuzz
12a89c4cce), and ``runtime_checks=False`` (no asserts, valid inputs
still right). Kernels with checks are compiled in Triton's debug mode, where asserts exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_SCRIPT = Path(__file__).with_name("triton_check_cases.py")
_CASES = [
    "getitem",
    "gather",
    "embedding_sum",
    "embedding_sum_looped",
    "scatter_add",
    "index_put",
    "masked_lanes",
    "integer_division",
    "divisor_of_nothing",
    "divisor_outside_the_loop",
    "float_division",
    "unchecked",
]
_UNCHECKED = ("float_division", "unchecked")


@pytest.fixture(scope="module")
def outcomes(kiln_cache: Path) -> dict[str, Any]:
    """Each case's JSON record; ``crashed``: the case running when the child process died."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "KILN_CACHE_DIR": str(kiln_cache)}
    done = subprocess.run([sys.executable, str(_SCRIPT)], capture_output=True, text=True, timeout=900, env=env)
    records: dict[str, Any] = {"stderr": done.stderr[-3000:], "returncode": done.returncode}
    current = None
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            if "start" in record:
                current = record["start"]
            else:
                records[record["case"]] = record
    if done.returncode != 0:
        records["crashed"] = current
    return records


@pytest.mark.parametrize("case", _CASES)
def test_case(outcomes: dict[str, Any], case: str) -> None:
    record = outcomes.get(case)
    if record is None:
        where = "the process died in it" if outcomes.get("crashed") == case else "it did not run"
        pytest.fail(f"case {case}: {where} (exit status {outcomes['returncode']}):\n{outcomes['stderr']}")
    assert record["valid"], f"{case}: valid inputs differ from eager"
    checked = case not in _UNCHECKED
    assert record["asserts"] == checked and record["debug"] == checked, record
    for failure in record["failures"]:
        assert failure["compiled"] == failure["eager"], failure["message"]


def test_interpreter_asserts_are_off_again(outcomes: dict[str, Any]) -> None:
    assert outcomes.get("interpreter_restored") == {"case": "interpreter_restored", "debug": False}
