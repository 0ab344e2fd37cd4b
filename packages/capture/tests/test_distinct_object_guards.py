"""Existing lists, dicts and objects the region writes are guarded to stay distinct from the others it reads or
writes (`DISTINCT`): a trace made for two different lists assumed that appending to one leaves the other as it
was, so a later call passing the same list twice must recompile, not reuse the entry. The other way round, an
object reached through two paths is one tracker, guarded to stay one object (`ALIASED`). Results always equal
eager's; calls that keep the traced pattern do not recompile."""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any

import torch

import capture

LOG: list[Any] = []
OTHER_LOG: list[Any] = []


class Box:
    def __init__(self, value: Any) -> None:
        self.value = value


class Recorder:
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def record(self, item: Any) -> None:
        self.log.append(item)


def _compiled(fn: Callable[..., Any]) -> tuple[Callable[..., Any], list[capture.Recompiled]]:
    capture.reset()  # entries made by an earlier test for the same code would be reused
    events: list[capture.Recompiled] = []
    hooks = capture.CaptureHooks()
    hooks.on_recompile.append(events.append)
    return capture.optimize("eager", hooks=hooks)(fn), events


def _state(value: Any) -> Any:
    """A comparable picture of the Python state a call left (objects by their attributes)."""
    if isinstance(value, (list, tuple, collections.deque)):
        return [_state(v) for v in value]
    if isinstance(value, dict):
        return {k: _state(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if hasattr(value, "__dict__"):
        return _state(vars(value))
    return value


def _check_like_eager(fn: Callable[..., Any], make_args: list[Callable[[], tuple[Any, ...]]]) -> int:
    """Calls the compiled `fn` with each set of arguments, and `fn` itself with a deep copy (aliasing kept):
    results and the state left in the arguments must match. Returns the number of recompiles."""
    compiled, events = _compiled(fn)
    for make in make_args:
        args = make()
        eager_args = copy.deepcopy(args)
        expected = fn(*eager_args)
        got = compiled(*args)
        torch.testing.assert_close(got, expected)
        assert _state(args) == _state(eager_args)
    return len(events)


def append_then_read(x: torch.Tensor, a: list[Any], b: list[Any]) -> torch.Tensor:
    a.append(1)
    return x + len(b)


def _two_lists() -> tuple[Any, ...]:
    return torch.zeros(2), [], []


def _one_list_twice() -> tuple[Any, ...]:
    shared: list[Any] = []
    return torch.zeros(2), shared, shared


def test_two_lists_that_become_one_recompile() -> None:
    recompiles = _check_like_eager(append_then_read, [_two_lists, _two_lists, _one_list_twice, _one_list_twice,
                                                       _two_lists])
    assert recompiles == 1


def test_one_list_twice_that_becomes_two_recompiles() -> None:
    recompiles = _check_like_eager(append_then_read, [_one_list_twice, _one_list_twice, _two_lists, _two_lists])
    assert recompiles == 1


def test_the_guard_is_distinct_and_only_where_a_container_is_written() -> None:
    explanation = capture.explain(append_then_read, *_two_lists())
    distinct = [str(g) for g in explanation.guards if g.kind == "DISTINCT"]
    assert distinct == ["DISTINCT: L[1] is not L[2]"], explanation.guards

    def reads_both(x: torch.Tensor, a: list[Any], b: list[Any]) -> torch.Tensor:
        return x + len(a) + len(b)

    explanation = capture.explain(reads_both, *_two_lists())
    assert not [g for g in explanation.guards if g.kind == "DISTINCT"], explanation.guards


def append_to_both(x: torch.Tensor, a: list[Any], b: list[Any]) -> torch.Tensor:
    a.append(x.sum())
    b.append(2)
    return x * 2


def test_lists_only_appended_to_need_no_distinct_guard() -> None:
    explanation = capture.explain(append_to_both, *_two_lists())
    assert not [g for g in explanation.guards if g.kind == "DISTINCT"], explanation.guards
    assert _check_like_eager(append_to_both, [_two_lists, _one_list_twice, _two_lists]) == 0


def store_then_read_attribute(x: torch.Tensor, first: Box, second: Box) -> torch.Tensor:
    first.value = 5
    return x + second.value


def _two_boxes() -> tuple[Any, ...]:
    return torch.zeros(2), Box(1), Box(1)  # equal values: only identity tells the calls apart


def _one_box_twice() -> tuple[Any, ...]:
    box = Box(1)
    return torch.zeros(2), box, box


def test_attributes_of_two_objects_that_become_one() -> None:
    assert _check_like_eager(store_then_read_attribute,
                             [_two_boxes, _two_boxes, _one_box_twice, _one_box_twice, _two_boxes]) == 1


def test_attributes_of_one_object_twice_that_becomes_two() -> None:
    assert _check_like_eager(store_then_read_attribute, [_one_box_twice, _one_box_twice, _two_boxes, _two_boxes]) == 1


def store_then_read_item(x: torch.Tensor, first: dict[str, Any], second: dict[str, Any]) -> torch.Tensor:
    first["k"] = 3
    return x + second["k"]


def test_two_dicts_that_become_one() -> None:
    def two() -> tuple[Any, ...]:
        return torch.zeros(2), {"k": 1}, {"k": 1}

    def one() -> tuple[Any, ...]:
        shared = {"k": 1}
        return torch.zeros(2), shared, shared

    assert _check_like_eager(store_then_read_item, [two, two, one, one, two]) == 1


def through_dict_values(x: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
    state["log"].append(1)
    return x + len(state["seen"])


def test_lists_held_as_dict_values_that_become_one() -> None:
    def two() -> tuple[Any, ...]:
        return torch.zeros(2), {"log": [], "seen": []}

    def one() -> tuple[Any, ...]:
        shared: list[Any] = []
        return torch.zeros(2), {"log": shared, "seen": shared}

    assert _check_like_eager(through_dict_values, [two, two, one, one, two]) == 1


def nested_and_global(x: torch.Tensor, state: dict[str, Any]) -> torch.Tensor:
    state["log"].append(1)
    return x + len(LOG)


def test_a_list_held_in_a_dict_and_as_a_global_is_one_list_in_the_trace() -> None:
    LOG.clear()
    compiled, _ = _compiled(nested_and_global)
    torch.testing.assert_close(compiled(torch.zeros(2), {"log": LOG}), torch.ones(2))  # eager's: LOG grew first
    assert LOG == [1]


def through_a_method(x: torch.Tensor, recorder: Recorder, seen: list[Any]) -> torch.Tensor:
    recorder.record(1)
    return x + len(seen)


def test_a_receivers_list_that_becomes_an_argument() -> None:
    def two() -> tuple[Any, ...]:
        return torch.zeros(2), Recorder([]), []

    def one() -> tuple[Any, ...]:
        shared: list[Any] = []
        return torch.zeros(2), Recorder(shared), shared

    assert _check_like_eager(through_a_method, [two, two, one, one, two]) == 1


def deques(x: torch.Tensor, a: collections.deque[Any], b: collections.deque[Any]) -> torch.Tensor:
    a.append(1)
    return x + len(b)


def test_two_deques_that_become_one() -> None:
    def two() -> tuple[Any, ...]:
        return torch.zeros(2), collections.deque(), collections.deque()

    def one() -> tuple[Any, ...]:
        shared: collections.deque[Any] = collections.deque()
        return torch.zeros(2), shared, shared

    assert _check_like_eager(deques, [two, two, one, one, two]) == 1


def module_state(x: torch.Tensor, items: list[Any]) -> torch.Tensor:
    LOG.append(len(items))
    OTHER_LOG.append(1)
    return x + len(items)


def test_the_usual_distinct_objects_never_recompile() -> None:
    LOG.clear()
    OTHER_LOG.clear()

    def fresh() -> tuple[Any, ...]:
        return torch.zeros(2), [1, 2]

    compiled, events = _compiled(module_state)
    for _ in range(6):
        torch.testing.assert_close(compiled(*fresh()), torch.full((2,), 2.0))
    assert not events, "\n".join(event.describe() for event in events)
    assert LOG == [2] * 6 and OTHER_LOG == [1] * 6

    def boxes() -> tuple[Any, ...]:
        return torch.zeros(2), Box(1), Box(2)

    assert _check_like_eager(store_then_read_attribute, [boxes] * 6) == 0


def many_lists(x: torch.Tensor, lists: list[list[Any]]) -> torch.Tensor:
    for lst in lists[:5]:
        lst.append(1)
    return x + sum(len(lst) for lst in lists)


def test_many_pairs_are_checked_at_once() -> None:
    def distinct() -> tuple[Any, ...]:
        return torch.zeros(2), [[0] for _ in range(6)]

    def two_the_same() -> tuple[Any, ...]:
        lists: list[list[Any]] = [[0] for _ in range(6)]
        lists[5] = lists[1]
        return torch.zeros(2), lists

    explanation = capture.explain(many_lists, *distinct())
    distinct_guards = [g for g in explanation.guards if g.kind == "DISTINCT"]
    assert len(distinct_guards) == 1, explanation.guards
    assert _check_like_eager(many_lists, [distinct, distinct, two_the_same, two_the_same, distinct]) == 1
