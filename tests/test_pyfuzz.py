"""The Python-level fuzzer (tools/pyfuzz): its generator, its comparison, its shrinker, and a slice
of seeds through capture, each compared with CPython."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tools.pyfuzz.check import CALLS, check, compare, run_calls
from tools.pyfuzz.generator import PRELUDE, PyProgram, generate
from tools.pyfuzz.shrink import shrink

SLICE = (0, 3, 7, 11, 2193, 2417)
"""Seeds checked on every run; 2193 raised inside a resumed try block (capture's exception tables)."""


def test_generation_is_a_function_of_the_seed() -> None:
    assert generate(5).source == generate(5).source
    assert generate(5).source != generate(6).source


def test_programs_run_eagerly() -> None:
    for seed in range(12):
        outcomes = run_calls(generate(seed), None, "eager")
        assert len(outcomes) == len(CALLS)
        assert all(o.error is None for o in outcomes), (seed, [o.error for o in outcomes])


def _program(body: str) -> PyProgram:
    return PyProgram(0, PRELUDE + "\n\n" + body)


_BODY = '''def program(x, y, n):
    t1 = x * SCALE
    STATE["log"].append(n)
    return [t1, y], [n], []
'''


def test_a_compiler_that_forgets_a_side_effect_or_a_rebound_global_is_caught() -> None:
    program = _program(_BODY)
    eager = run_calls(program, None, "eager")

    def forgets_the_log(fn: Any) -> Any:
        def run(*args: Any) -> Any:
            log = fn.__globals__["STATE"]["log"]
            result = fn(*args)
            log.pop()
            return result

        return run

    def keeps_the_first_scale(fn: Any) -> Any:
        first = fn.__globals__["SCALE"]

        def run(x: Any, y: Any, n: int) -> Any:
            fn.__globals__["STATE"]["log"].append(n)
            return [[x * first, y], [n], []]

        return run

    verdict = compare(eager, run_calls(program, forgets_the_log, "kiln"))
    assert verdict.kind == "mismatch" and "module state" in verdict.detail and verdict.where.startswith("call 1")
    verdict = compare(eager, run_calls(program, keeps_the_first_scale, "kiln"))
    assert verdict.kind == "mismatch" and verdict.where.startswith("call 3")  # SCALE is rebound before call 3


def test_a_program_with_grad_compares_the_inputs_gradients() -> None:
    program = _program("GRAD = True\n\n\n" + _BODY)
    eager = run_calls(program, None, "eager")
    result, grads = eager[0].result
    assert result[0][0].shape == (4, 5) and grads is not None and grads[0].abs().sum() > 0

    def drops_a_gradient(fn: Any) -> Any:
        return lambda x, y, n: fn(x.detach(), y, n)

    verdict = compare(eager, run_calls(program, drops_a_gradient, "kiln"))
    assert verdict.kind == "mismatch" and verdict.where.startswith("call 1")
    assert compare(eager, run_calls(program, None, "again")).ok
    assert sum("GRAD = True" in generate(seed).source for seed in range(200)) in range(40, 120)


def test_the_shrinker_keeps_the_failing_line() -> None:
    body = '''def program(x, y, n):
    t1 = x + 1
    if n > 0:
        t2 = y * 2
        t3 = t2 - 1
    STATE["calls"] += 1
    t4 = x * SCALE
    return [t1], [n], []
'''

    def fails(program: PyProgram) -> Any:
        kind = "mismatch" if "SCALE" in program.source.split("def program")[1] else "ok"
        return type("V", (), {"kind": kind})()

    smallest = shrink(_program(body), fails, "mismatch")
    function = smallest.source.split("def program(x, y, n):\n")[1]
    assert function.splitlines() == ["    t4 = x * SCALE", "    return [t1], [n], []"]


@pytest.mark.parametrize("seed", SLICE)
def test_capture_matches_cpython(seed: int) -> None:
    verdict = check(generate(seed), "eager")
    assert verdict.ok, f"seed {seed}: {verdict.kind} at {verdict.where}: {verdict.detail}\n{generate(seed).source}"


_ROUNDING_SENSITIVE = '''def program(x, y, n):
    total = (x * 1e6).sum() - (x * 1e6).sum().round()  # the fraction below 1 of a large sum
    if total > 0:
        return [x + 1, y], [n], []
    return [x - 1, y], [n], []
'''

_WELL_CONDITIONED = '''def program(x, y, n):
    if (x * x).sum() > 0:
        return [x.sin() + 1, y], [n], []
    return [x, y], [n], []
'''


def test_programs_whose_branches_turn_on_rounding_are_checked_through_capture_alone() -> None:
    verdict = check(_program(_ROUNDING_SENSITIVE), target="inductor")
    assert verdict.kind == "capture_only" and "ill-conditioned" in verdict.detail
    assert check(_program(_WELL_CONDITIONED), target="inductor").kind == "ok"
    assert check(_program(_ROUNDING_SENSITIVE), target="eager").kind == "ok"  # capture alone computes as eager


def test_a_wrong_capture_of_an_ill_conditioned_program_is_still_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import frontend

    def wrong_compile(fn: Any, backend: str = "inductor") -> Any:
        assert backend == "eager"  # ill-conditioned: checked through capture alone
        return lambda x, y, n: fn(x, y, n + 1)

    monkeypatch.setattr(frontend, "compile", wrong_compile)
    verdict = check(_program(_ROUNDING_SENSITIVE), target="inductor")
    assert verdict.kind == "mismatch" and "checked through capture alone" in verdict.detail


def _nested_defs(seeds: range) -> dict[int, str]:
    """The source of the first nested def (``def gN(a): ...``) of each seed's program that has one."""
    found = {}
    for seed in seeds:
        body = generate(seed).source.split("def program(x, y, n):\n")[1]
        lines = body.splitlines()
        for index, line in enumerate(lines):
            if line.lstrip().startswith("def g") and line.rstrip().endswith("(a):"):
                indent = len(line) - len(line.lstrip())
                end = index + 1
                while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > indent:
                    end += 1
                found[seed] = "\n".join(text[indent:] for text in lines[index:end])
                break
    return found


def test_nested_defs_break_the_graph_and_sit_in_no_grad_and_try_blocks() -> None:
    nested = _nested_defs(range(400))
    kinds = {
        "print": lambda s: 'print("h' in s,
        "item": lambda s: ".item() > 0:" in s,
        "float": lambda s: "float(b.sum())" in s,
        "no_grad": lambda s: "with torch.no_grad():" in s,
        "try": lambda s: "except ValueError:" in s,
        "def inside a block": lambda s: "no_grad():\n        def h" in s or "try:\n        def h" in s,
        "break inside a block": lambda s: ("no_grad" in s or "try:" in s) and ('print("h' in s or "float(b" in s),
        "plain": lambda s: "print" not in s and "item" not in s and "float" not in s and "try" not in s
                           and "no_grad" not in s,
    }
    missing = [kind for kind, has in kinds.items() if not any(has(s) for s in nested.values())]
    assert not missing, missing
    for seed in list(nested)[:8]:
        outcomes = run_calls(generate(seed), None, "eager")
        assert all(o.error is None for o in outcomes), (seed, [o.error for o in outcomes])



def test_the_last_call_puts_an_infinity_in_each_input() -> None:
    x, y, _ = CALLS[-1].arguments()
    assert x.isposinf().sum() == 1 and y.isneginf().sum() == 1
    assert all(torch.isfinite(t).all() for call in CALLS[:-1] for t in call.arguments()[:2])
