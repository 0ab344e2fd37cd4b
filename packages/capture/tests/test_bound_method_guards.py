"""Bound methods (``log.append``, ``d.get``, ``obj.method``) are made anew at every attribute read: they are
guarded through their type, their function and their receiver, never by identity; a list the region only
appends to is not guarded on its length. A compiled function that appends to module state on every call
compiles once."""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

import capture

STATE: dict[str, Any] = {"log": [], "cache": {"k": 1.5}}
LOG: list[Any] = []


@capture.disable
def outside(t: torch.Tensor) -> torch.Tensor:
    """Runs in plain Python: a graph break whose result is a tensor."""
    return t.sum()


def _compiled(fn: Callable[..., Any]) -> tuple[Callable[..., Any], list[capture.Recompiled]]:
    events: list[capture.Recompiled] = []
    hooks = capture.CaptureHooks()
    hooks.on_recompile.append(events.append)
    return capture.optimize("eager", hooks=hooks)(fn), events


def _describe(events: list[capture.Recompiled]) -> str:
    return "\n".join(event.describe() for event in events)


def append_across_a_break(t: torch.Tensor) -> torch.Tensor:
    y = t * 2
    STATE["log"].append(outside(y))  # breaks with `STATE["log"].append` on the stack
    LOG.append(y.sum() + 1)
    return y + 1


def test_appending_to_module_lists_across_a_break_compiles_once() -> None:
    STATE["log"].clear()
    LOG.clear()
    compiled, events = _compiled(append_across_a_break)
    inputs = [torch.randn(3) for _ in range(5)]
    results = [compiled(t) for t in inputs]
    assert not events, _describe(events)
    for t, result, logged, sums in zip(inputs, results, STATE["log"], LOG, strict=True):
        torch.testing.assert_close(result, t * 2 + 1)
        torch.testing.assert_close(logged, (t * 2).sum())
        torch.testing.assert_close(sums, (t * 2).sum() + 1)
    assert len(STATE["log"]) == len(LOG) == 5


def append_only(t: torch.Tensor) -> torch.Tensor:
    LOG.append(t.sum())
    LOG.extend([t.max(), 1])
    return t * 2


def test_a_list_only_appended_to_is_not_guarded_on_its_length() -> None:
    LOG.clear()
    compiled, events = _compiled(append_only)
    inputs = [torch.randn(3) for _ in range(5)]
    for t in inputs:
        torch.testing.assert_close(compiled(t), t * 2)
    assert not events, _describe(events)
    expected: list[Any] = []
    for t in inputs:
        expected += [t.sum(), t.max(), 1]
    assert len(LOG) == len(expected)
    for got, want in zip(LOG, expected, strict=True):
        torch.testing.assert_close(got, want) if isinstance(want, torch.Tensor) else (got == want)
    explanation = capture.explain(append_only, torch.randn(3))
    assert not [g for g in explanation.guards if g.kind == "LENGTH"], explanation.guards


def depends_on_the_length(t: torch.Tensor) -> torch.Tensor:
    LOG.append(1)
    if len(LOG) > 3:
        return t * 3
    return t + LOG[-1]


def test_a_list_whose_length_is_read_is_still_guarded() -> None:
    LOG.clear()
    compiled, _ = _compiled(depends_on_the_length)
    eager: list[Any] = []
    for _ in range(5):
        t = torch.randn(3)
        expected = t * 3 if len(eager) + 1 > 3 else t + 1
        eager.append(1)
        torch.testing.assert_close(compiled(t), expected)
    assert LOG == eager


def dict_get_across_a_break(t: torch.Tensor) -> torch.Tensor:
    value = STATE["cache"].get("k", outside(t))  # breaks with `STATE["cache"].get` on the stack
    return t * value


def test_a_dict_method_on_the_stack_of_a_break_compiles_once() -> None:
    compiled, events = _compiled(dict_get_across_a_break)
    for _ in range(5):
        t = torch.randn(3)
        torch.testing.assert_close(compiled(t), t * 1.5)
    assert not events, _describe(events)


def call_method(t: torch.Tensor, method: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    return method(t) + 1


class Scaler:
    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.seen: list[torch.Tensor] = []

    def scale(self, t: torch.Tensor) -> torch.Tensor:
        return t * self.factor


def test_bound_methods_passed_as_arguments_are_not_guarded_by_identity() -> None:
    scaler, seen = Scaler(2.0), []
    compiled, events = _compiled(call_method)
    for _ in range(4):
        t = torch.randn(3)
        torch.testing.assert_close(compiled(t, scaler.scale), t * 2 + 1)  # a new bound method each call
    builtin_calls = _compiled(lambda t, f: f(t.sum()) or t + 1)
    for _ in range(4):
        t = torch.randn(3)
        torch.testing.assert_close(builtin_calls[0](t, seen.append), t + 1)  # a builtin method of a list
    assert len(seen) == 4
    assert not events, _describe(events)
    assert not builtin_calls[1], _describe(builtin_calls[1])


def test_a_method_replaced_on_the_instance_or_another_receiver_gives_eagers_result() -> None:
    scaler = Scaler(2.0)
    compiled, events = _compiled(call_method)
    t = torch.randn(3)
    torch.testing.assert_close(compiled(t, scaler.scale), t * 2 + 1)
    torch.testing.assert_close(compiled(t, scaler.scale), t * 2 + 1)
    assert not events, _describe(events)
    torch.testing.assert_close(compiled(t, Scaler(5.0).scale), t * 5 + 1)  # another receiver, same function

    def triple(self: Scaler, t: torch.Tensor) -> torch.Tensor:
        return t * 3

    scaler.scale = types.MethodType(triple, scaler)  # type: ignore[method-assign]
    torch.testing.assert_close(compiled(t, scaler.scale), t * 3 + 1)
    scaler.scale = lambda t: t - 7  # type: ignore[method-assign]
    torch.testing.assert_close(compiled(t, scaler.scale), t - 7 + 1)


def scale_across_a_break(t: torch.Tensor, scaler: Scaler) -> torch.Tensor:
    y = t * 2
    return scaler.scale(outside(y) + y)  # breaks with `scaler.scale` on the stack


def test_a_method_on_the_stack_of_a_break_follows_instance_monkeypatching() -> None:
    scaler = Scaler(2.0)
    compiled, events = _compiled(scale_across_a_break)
    for _ in range(4):
        t = torch.randn(3)
        torch.testing.assert_close(compiled(t, scaler), ((t * 2).sum() + t * 2) * 2)
    assert not events, _describe(events)
    scaler.scale = lambda t: t - 7  # type: ignore[method-assign]
    t = torch.randn(3)
    torch.testing.assert_close(compiled(t, scaler), (t * 2).sum() + t * 2 - 7)
    del scaler.scale
    Scaler.scale, original = (lambda self, t: t * 10), Scaler.scale  # type: ignore[method-assign]
    try:
        torch.testing.assert_close(compiled(t, scaler), ((t * 2).sum() + t * 2) * 10)
    finally:
        Scaler.scale = original  # type: ignore[method-assign]


def append_then_count(x: torch.Tensor, append: Callable[[Any], None]) -> torch.Tensor:
    append(x.sum())
    return x + len(LOG)


def test_a_receiver_that_was_a_global_list_must_stay_it() -> None:
    # The list behind `append` was LOG when compiled: its appends were replayed through G['LOG'].
    LOG.clear()
    compiled, _ = _compiled(append_then_count)
    t = torch.zeros(2)
    torch.testing.assert_close(compiled(t, LOG.append), t + 1)
    other: list[Any] = [1, 2, 3]
    torch.testing.assert_close(compiled(t, other.append), t + 1)
    assert len(LOG) == 1 and len(other) == 4
