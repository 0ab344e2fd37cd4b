"""Cases of test_runtime_checks.py, run in a child process: a regression may crash it (SIGSEGV, SIGFPE).

``python runtime_check_cases.py`` compiles each graph with ``frontend.compile`` (default backend,
CPU), checks valid inputs against eager, then runs every invalid input and prints one JSON line per
case: the exception eager raised and the one the compiled graph raised. Before each case it prints
``{"start": name}``, so a crash names its case. Then it compiles a few of the ops with
``runtime_checks=False`` and checks them on valid inputs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

ROWS, COLS = 6, 5


def index_ops(
    x: torch.Tensor, w: torch.Tensor, i_get: torch.Tensor, i_gather: torch.Tensor, i_emb: torch.Tensor,
    i_sel: torch.Tensor, i_scatter: torch.Tensor, i_put: torch.Tensor, i_add: torch.Tensor,
    i_hot: torch.Tensor, i_target: torch.Tensor,
) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """Every lowered op indexing by data, each through its own index argument."""
    src = torch.arange(COLS, dtype=x.dtype).expand(2, COLS) * 0.5
    return (
        x[i_get] + 1,
        torch.gather(x, 1, i_gather) * 2,
        F.embedding(i_emb, w).sum(-1),
        torch.index_select(x, 0, i_sel) - 1,
        torch.scatter_add(x, 0, i_scatter, src),
        torch.scatter(x, 0, i_scatter, src),
        torch.index_put(x, (i_put,), src, accumulate=True),
        torch.index_put(x, (i_put,), src),
        torch.index_add(x, 0, i_add, src),
        F.one_hot(i_hot, COLS) * 3,
        F.cross_entropy(x, i_target),
    )


def division_ops(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, d: torch.Tensor, e: torch.Tensor, f: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Integer divisions (int64, int32, int8) whose divisors may hold zeros."""
    return (
        a // b,
        a % b,
        torch.fmod(a, b),
        torch.div(a, b, rounding_mode="trunc"),
        torch.div(a, b, rounding_mode="floor"),
        torch.remainder(c, d),
        c // d,
        e // f,
        torch.fmod(e, f),
    )


def float_division(x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Float division by zero is inf/nan, as in eager: no check."""
    return x / z, x // z, x % z, torch.fmod(x, z), torch.div(x, z, rounding_mode="trunc")


def _index_inputs(generator: torch.Generator) -> dict[str, torch.Tensor]:
    def ints(high: int, *shape: int) -> torch.Tensor:
        return torch.randint(0, high, shape, generator=generator)

    return {
        "x": torch.randn(ROWS, COLS, generator=generator),
        "w": torch.randn(10, 3, generator=generator),
        "i_get": torch.tensor([-1, 3, -ROWS, 2]),  # negative indices in range count from the end
        "i_gather": ints(COLS, ROWS, 3),
        "i_emb": ints(10, 4, 2),
        "i_sel": ints(ROWS, 3),
        "i_scatter": ints(ROWS, 2, COLS),
        "i_put": torch.tensor([-1, 2]),
        "i_add": ints(ROWS, 2),
        "i_hot": ints(COLS, 4),
        "i_target": ints(COLS, ROWS),
    }


# (case name, argument to spoil, bad value): each is the valid inputs with one index replaced.
INDEX_CASES: list[tuple[str, str, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("getitem_huge", "i_get", lambda t: t.index_fill(0, torch.tensor([1]), 100000)),
    ("getitem_negative", "i_get", lambda t: t.index_fill(0, torch.tensor([2]), -ROWS - 1)),
    ("gather_high", "i_gather", lambda t: t.index_fill(1, torch.tensor([2]), COLS)),
    ("gather_negative", "i_gather", lambda t: t.index_fill(0, torch.tensor([4]), -1)),
    ("embedding_huge", "i_emb", lambda t: t.index_fill(0, torch.tensor([3]), 1 << 40)),
    ("embedding_negative", "i_emb", lambda t: t.index_fill(0, torch.tensor([0]), -1)),
    ("index_select", "i_sel", lambda t: t.index_fill(0, torch.tensor([1]), ROWS)),
    ("scatter_high", "i_scatter", lambda t: t.index_fill(1, torch.tensor([4]), ROWS)),
    ("scatter_negative", "i_scatter", lambda t: t.index_fill(0, torch.tensor([1]), -1)),
    ("index_put_high", "i_put", lambda t: t.index_fill(0, torch.tensor([1]), ROWS)),
    ("index_put_negative", "i_put", lambda t: t.index_fill(0, torch.tensor([0]), -ROWS - 1)),
    ("index_add_high", "i_add", lambda t: t.index_fill(0, torch.tensor([0]), ROWS)),
    ("index_add_negative", "i_add", lambda t: t.index_fill(0, torch.tensor([1]), -1)),
    ("one_hot_high", "i_hot", lambda t: t.index_fill(0, torch.tensor([2]), COLS)),
    ("one_hot_negative", "i_hot", lambda t: t.index_fill(0, torch.tensor([0]), -1)),
    ("loss_target_high", "i_target", lambda t: t.index_fill(0, torch.tensor([3]), COLS)),
    ("loss_target_negative", "i_target", lambda t: t.index_fill(0, torch.tensor([5]), -2)),
]


def _division_inputs(generator: torch.Generator) -> dict[str, torch.Tensor]:
    def nonzero(dtype: torch.dtype, n: int) -> torch.Tensor:
        values = torch.randint(1, 50, (n,), generator=generator, dtype=dtype)
        return torch.where(torch.rand(n, generator=generator) < 0.5, -values, values)

    return {
        "a": torch.randint(-1000, 1000, (37,), generator=generator),
        "b": nonzero(torch.int64, 37),
        "c": torch.randint(-1000, 1000, (37,), generator=generator, dtype=torch.int32),
        "d": nonzero(torch.int32, 37),
        "e": torch.randint(-100, 100, (37,), generator=generator, dtype=torch.int8),
        "f": nonzero(torch.int8, 37),
    }


def _zero_at(position: int) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda t: t.index_fill(0, torch.tensor([position]), 0)


DIVISION_CASES: list[tuple[str, str, Callable[[torch.Tensor], torch.Tensor]]] = [
    ("divide_int64_vector_lane", "b", _zero_at(5)),
    ("divide_int64_scalar_tail", "b", _zero_at(36)),
    ("divide_int32", "d", _zero_at(20)),
    ("divide_int8", "f", _zero_at(0)),
]

CASES = [name for name, _, _ in INDEX_CASES + DIVISION_CASES] + [
    "divide_by_constant_zero",
    "first_call_fails",
    "float_division_by_zero",
]


def _report(**record: Any) -> None:
    print(json.dumps(record), flush=True)


def _outcome(fn: Callable[..., Any], args: list[torch.Tensor]) -> tuple[str | None, str]:
    try:
        fn(*args)
    except Exception as error:  # what is raised is the result
        return type(error).__name__, str(error)
    return None, ""


def _same(compiled: Any, expected: Any) -> bool:
    try:
        torch.testing.assert_close(compiled, expected, equal_nan=True)
    except AssertionError:
        return False
    return True


def _run_cases(
    name: str,
    fn: Callable[..., Any],
    inputs: dict[str, torch.Tensor],
    cases: list[tuple[str, str, Callable[[torch.Tensor], torch.Tensor]]],
    checks: bool,
) -> None:
    import frontend

    compiled = frontend.compile(fn, options={"runtime_checks": checks, "fallback_to_eager": False})
    valid = list(inputs.values())
    _report(start=name)
    _report(valid=name, ok=_same(compiled(*valid), fn(*valid)))
    if not checks:
        return
    keys = list(inputs)
    for case, argument, spoil in cases:
        _report(start=case)
        args = list(valid)
        args[keys.index(argument)] = spoil(inputs[argument])
        eager, _ = _outcome(fn, args)
        raised, message = _outcome(compiled, args)
        again = _same(compiled(*valid), fn(*valid))  # the process goes on, and so does the graph
        _report(case=case, eager=eager, compiled=raised, message=message, valid_after=again)


def _single_cases() -> None:
    import frontend

    generator = torch.Generator().manual_seed(1)
    a = torch.randint(-50, 50, (21,), generator=generator)
    _report(start="divide_by_constant_zero")
    by_zero = frontend.compile(lambda t: t // 0 + 1, options={"fallback_to_eager": False})
    eager, _ = _outcome(lambda t: t // 0 + 1, [a])
    raised, message = _outcome(by_zero, [a])
    _report(case="divide_by_constant_zero", eager=eager, compiled=raised, message=message, valid_after=True)

    # A graph whose very first run fails a check raises like eager and stays compiled (no fallback).
    _report(start="first_call_fails")
    fallbacks: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: fallbacks.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("kiln").addHandler(handler)
    x = torch.randn(7, 3, generator=generator)

    def lookup(table: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return F.embedding(rows, table) * 3

    first = frontend.compile(lookup, options={"logs": "fallbacks"})
    eager, _ = _outcome(lookup, [x, torch.tensor([1, 7])])
    raised, message = _outcome(first, [x, torch.tensor([1, 7])])
    rows = torch.tensor([6, 0])
    again = _same(first(x, rows), lookup(x, rows)) and not any("runs eagerly" in m for m in fallbacks)
    _report(case="first_call_fails", eager=eager, compiled=raised, message=message, valid_after=again)

    _report(start="float_division_by_zero")
    numerator = torch.randn(40, generator=generator)
    zeros = torch.where(torch.rand(40, generator=generator) < 0.5, 0.0, torch.randn(40, generator=generator))
    divided = frontend.compile(float_division, options={"fallback_to_eager": False})
    same = _same(divided(numerator, zeros), float_division(numerator, zeros))
    _report(case="float_division_by_zero", eager=None, compiled=None, message="", valid_after=same)


def unchecked_ops(
    x: torch.Tensor, w: torch.Tensor, i_get: torch.Tensor, i_gather: torch.Tensor, i_emb: torch.Tensor,
    a: torch.Tensor, b: torch.Tensor,
) -> tuple[torch.Tensor, ...]:  # fmt: skip
    """A few indexing and division ops, compiled without checks."""
    return x[i_get] * 2, torch.gather(x, 1, i_gather) + 1, F.embedding(i_emb, w).sum(-1), a // b, a % b


def main() -> None:
    """Every case with runtime checks, then valid inputs without them."""
    generator = torch.Generator().manual_seed(0)
    index_inputs, division_inputs = _index_inputs(generator), _division_inputs(generator)
    _run_cases("index_ops", index_ops, index_inputs, INDEX_CASES, True)
    _run_cases("division_ops", division_ops, division_inputs, DIVISION_CASES, True)
    _single_cases()
    names = ("x", "w", "i_get", "i_gather", "i_emb")
    unchecked = {**{k: index_inputs[k] for k in names}, "a": division_inputs["a"], "b": division_inputs["b"]}
    _run_cases("unchecked_ops", unchecked_ops, unchecked, [], False)


if __name__ == "__main__":
    main()
