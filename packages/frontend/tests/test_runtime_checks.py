"""Compiled code raises what eager raises for out-of-range indices and integer division by zero.

Each case (see runtime_check_cases.py) compiles with ``frontend.compile`` (default backend, CPU):
valid inputs, including negative indices in range, give eager's values; an invalid index or a zero
divisor raises eager's exception type (never a crash, never garbage), and the graph then runs valid
inputs again. Float division by zero stays inf/nan. With ``runtime_checks=False`` valid inputs still
work. The cases run in a child process, so a regression that crashes (SIGSEGV, SIGFPE) fails the
case instead of killing pytest.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

_SCRIPT = Path(__file__).with_name("runtime_check_cases.py")


def _case_names() -> list[str]:
    spec = importlib.util.spec_from_file_location("runtime_check_cases", _SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.CASES)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Any]:
    """Every case's JSON record; ``crashed``: the case running when the child process died."""
    done = subprocess.run(
        [sys.executable, str(_SCRIPT)], capture_output=True, text=True, timeout=900, env=dict(os.environ)
    )
    records: dict[str, Any] = {"stderr": done.stderr[-3000:], "returncode": done.returncode}
    current = None
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        record = json.loads(line)
        if "start" in record:
            current = record["start"]
        elif "valid" in record:
            records[f"valid:{record['valid']}"] = record["ok"]
        else:
            records[record["case"]] = record
    if done.returncode != 0:
        records["crashed"] = current
    return records


def _failure(outcomes: dict[str, Any], case: str) -> str:
    if outcomes.get("crashed") == case:
        return f"the process died (exit status {outcomes['returncode']}) in case {case}:\n{outcomes['stderr']}"
    return f"case {case} did not run:\n{outcomes['stderr']}"


@pytest.mark.parametrize("graph", ["index_ops", "division_ops", "unchecked_ops"])
def test_valid_inputs_match_eager(outcomes: dict[str, Any], graph: str) -> None:
    assert outcomes.get(f"valid:{graph}") is True, _failure(outcomes, graph)


@pytest.mark.parametrize("case", _case_names())
def test_raises_like_eager(outcomes: dict[str, Any], case: str) -> None:
    record = outcomes.get(case)
    assert record is not None, _failure(outcomes, case)
    assert record["compiled"] == record["eager"], record["message"]
    assert record["valid_after"], f"{case}: valid inputs after the failure differ from eager (or fell back)"
    if record["eager"] == "RuntimeError" and case.startswith("divide"):
        assert record["message"].startswith("ZeroDivisionError"), record["message"]


def test_first_run_failing_a_check_keeps_the_graph_compiled() -> None:
    """A failed runtime check on the first call is the data's fault: raised, no fallback to eager."""
    import torch

    from frontend.backends.fallback import compile_or_fall_back
    from frontend.config import Config
    from frontend.context import CompileContext
    from inductor_ir import IndexCheck

    calls: list[int] = []

    def compiled(x: torch.Tensor) -> torch.Tensor:
        calls.append(len(calls))
        if len(calls) == 1:
            raise IndexCheck("IndexError", "aten.embedding.default", 0).exception(12, 10, "cpp_k")
        return x * 2

    gm = torch.fx.symbolic_trace(lambda x: x * 3)
    context = CompileContext.for_config(Config(), "user_fn")
    runner = compile_or_fall_back(lambda: compiled, gm, context, "the forward graph")
    with pytest.raises(IndexError, match="index 12 is out of bounds"):
        runner(torch.ones(2))
    assert torch.equal(runner(torch.ones(2)), torch.full((2,), 2.0))  # still the compiled graph
    assert calls == [0, 1]
