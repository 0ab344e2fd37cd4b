"""Closure cells and sets that could alias between calls.

Cells: a closure the region calls may assign a cell (``nonlocal c; c += 1``) that the compiled function, or
another closure, also reads. Reached through two paths at trace time, the cell is one tracker, guarded to stay one
(`ALIASED`); two cells the trace saw, one written, are guarded to stay two (`DISTINCT`). Without those guards a
later call whose function shares (or stops sharing) the cell ran the entry and returned a stale value.

Sets: an existing set is never mutated inside a graph (`add`, `|=`, `discard` on one are graph breaks that run
in Python), and `in` on one is checked again on every call, so two sets passed as one object behave as eager.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch
from capture_helpers import RecordingBackend

import capture


def _inputs(seed: int) -> torch.Tensor:
    return torch.randn(4, generator=torch.Generator().manual_seed(seed))


def make_counter_pair() -> tuple[Callable[..., torch.Tensor], Callable[[], None]]:
    """`add_count(x, bump)` reads its cell `count` after calling `bump`, which may assign that very cell."""
    count = 0

    def bump() -> None:
        nonlocal count
        count += 1

    def add_count(x: torch.Tensor, step: Callable[[], None]) -> torch.Tensor:
        step()
        return x + count

    return add_count, bump


def _twin_runs(calls: list[tuple[int, int, int]]) -> None:
    """Run the same sequence compiled and eagerly on two fresh sets of closures: (function, bump, seed) picks,
    by index, which closure pair's function calls which pair's bump. Every count starts each call at 0, so the
    guards on the counts' values pass: only the cells' identities tell the calls apart."""
    compiled_pairs = [make_counter_pair() for _ in range(2)]
    eager_pairs = [make_counter_pair() for _ in range(2)]
    backend = RecordingBackend()
    compiled_fns = [capture.optimize(backend)(fn) for fn, _ in compiled_pairs]
    for fn_index, bump_index, seed in calls:
        for fn, _ in [*compiled_pairs, *eager_pairs]:
            fn.__closure__[0].cell_contents = 0  # type: ignore[index]
        x = _inputs(seed)
        got = compiled_fns[fn_index](x, compiled_pairs[bump_index][1])
        want = eager_pairs[fn_index][0](x, eager_pairs[bump_index][1])
        torch.testing.assert_close(got, want)
        # The cells themselves end up as eager's.
        for (fn, _), (eager_fn, _) in zip(compiled_pairs, eager_pairs):
            assert fn.__closure__[0].cell_contents == eager_fn.__closure__[0].cell_contents  # type: ignore[index]


def test_a_cell_shared_at_trace_time_must_stay_shared() -> None:
    # Traced with the function's own cell assigned by `bump` (one cell); then the other pair's function with
    # the first pair's bump: its own cell is not assigned, so it returns x + 0 (the entry used to return x + 1).
    _twin_runs([(0, 0, 0), (1, 0, 1)])


def test_cells_distinct_at_trace_time_must_stay_distinct() -> None:
    # Traced with the second pair's bump (another cell: the function reads 0); the second pair's function with
    # its own bump then reads the cell bump assigned (the entry used to return x + 0 again).
    _twin_runs([(0, 1, 0), (1, 1, 1)])


def test_a_closure_over_a_cell_of_the_frame_across_a_break() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        total = 0

        def add(v: int) -> None:
            nonlocal total
            total += v

        add(2)
        capture.graph_break()
        add(3)
        return x * total

    compiled = capture.optimize(RecordingBackend())(fn)
    for seed in range(3):
        x = _inputs(seed)
        torch.testing.assert_close(compiled(x), fn(x))


def _set_programs() -> list[Callable[..., Any]]:
    def add_then_contains(x: torch.Tensor, a: set[int], b: set[int]) -> torch.Tensor:
        a.add(1)
        return x + int(1 in b)

    def union_then_len(x: torch.Tensor, a: set[int], b: set[int]) -> torch.Tensor:
        a |= {1, 2}
        return x * len(b)

    def discard_then_contains(x: torch.Tensor, a: set[int], b: set[int]) -> torch.Tensor:
        a.discard(5)
        return x - int(5 in b)

    return [add_then_contains, union_then_len, discard_then_contains]


def test_sets_passed_as_one_object_behave_as_eager() -> None:
    for fn in _set_programs():
        compiled = capture.optimize(RecordingBackend())(fn)
        for seed in range(3):
            x = _inputs(seed)
            # Distinct sets first, then one set twice (and back), each against eager on fresh sets.
            torch.testing.assert_close(compiled(x, {5}, {5}), fn(x, {5}, {5}))
            shared, eager_shared = {5}, {5}
            torch.testing.assert_close(compiled(x, shared, shared), fn(x, eager_shared, eager_shared))
            assert shared == eager_shared


# Nested functions and lambdas, made anew on each call of the function defining them, are guarded through their
# code, globals, defaults and closure cells (not their identity, which recompiled on every call); the cells'
# identities then come from ALIASED/DISTINCT.


def _counted(fn: Any) -> tuple[RecordingBackend, Any]:
    backend = RecordingBackend()
    return backend, capture.optimize(backend)(fn)


def apply_fn(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    return fn(x) + 1


def test_a_fresh_lambda_argument_compiles_once_and_follows_its_closure() -> None:
    backend, compiled = _counted(apply_fn)
    for seed in range(5):
        x = _inputs(seed)
        scale = 2.0
        torch.testing.assert_close(compiled(x, lambda t: t * scale), x * 2.0 + 1)
    assert backend.count == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", capture.RecompileStormWarning)  # each new lambda is a real change
        for scale in (3.0, 4.0):  # what the lambda computes changes: a recompile
            x = _inputs(7)
            torch.testing.assert_close(compiled(x, lambda t: t * scale), x * scale + 1)
            torch.testing.assert_close(compiled(x, lambda t, s=scale: t - s), x - scale + 1)
    assert backend.count > 1


def test_a_closure_defined_before_a_break_compiles_once() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        total = 0
        shift = x.mean()

        def add(v: int) -> None:
            nonlocal total
            total += v

        def centered(t: torch.Tensor) -> torch.Tensor:
            return t - shift

        add(2)
        capture.graph_break()
        add(3)
        return centered(x) * total

    backend, compiled = _counted(fn)
    counts = []
    for seed in range(5):
        x = _inputs(seed)
        torch.testing.assert_close(compiled(x), fn(x))
        counts.append(backend.count)
    assert counts[1:] == counts[:1] * 4, counts


def test_a_decorated_nested_function_is_still_guarded_by_identity() -> None:
    def make(scale: float) -> Callable[[torch.Tensor], torch.Tensor]:
        def base(t: torch.Tensor) -> torch.Tensor:
            return t * scale

        @functools.wraps(base)
        def wrapper(t: torch.Tensor) -> torch.Tensor:
            return base(t)

        return wrapper

    backend, compiled = _counted(apply_fn)
    for scale in (2.0, 3.0, 2.0):
        x = _inputs(int(scale))
        torch.testing.assert_close(compiled(x, make(scale)), x * scale + 1)
    assert backend.count == 3  # each wrapper object is its own entry
