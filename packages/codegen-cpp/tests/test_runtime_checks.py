"""C++ kernels check indirect indices and integer divisors: what eager raises, never a crash.

The cases (cpp_check_cases.py) run in a child process, so a regression that crashes (SIGSEGV,
SIGFPE) fails its case instead of killing pytest: two translation units sharing the library's
failure record, an empty table (nothing read from its null data pointer), lanes outside a mask
(padding) left unchecked, a parallel vectorized gather with many bad lanes, lane-invariant
divisors, an index no gather reads (into an expanded dim), and ``runtime_checks=False`` (no check in the source, valid inputs still right).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_SCRIPT = Path(__file__).with_name("cpp_check_cases.py")
_CASES = [
    "two_translation_units",
    "empty_table",
    "empty_table_lookup",
    "masked_lanes",
    "parallel_gather",
    "row_divisor",
    "unread_lanes",
    "unchecked",
]


@pytest.fixture(scope="module")
def outcomes(cache_dir: Path) -> dict[str, Any]:
    """Each case's JSON record; ``crashed``: the case running when the child process died."""
    done = subprocess.run(
        [sys.executable, str(_SCRIPT)], capture_output=True, text=True, timeout=900, env=dict(os.environ)
    )
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
    # An embedding of an empty table runs eager's kernel, which checks every index itself.
    in_kernel = case not in ("unchecked", "empty_table")
    assert record["checked"] == in_kernel, f"{case}: kiln::checked_* in the source: {record['checked']}"
    for failure in record["failures"]:
        if case == "empty_table_lookup":
            # Eager fails another check first for an empty table (RuntimeError from index_select);
            # what matters is a Python exception and a living process.
            assert failure["compiled"] in ("IndexError", "RuntimeError"), failure
        else:
            assert failure["compiled"] == failure["eager"], failure["message"]
