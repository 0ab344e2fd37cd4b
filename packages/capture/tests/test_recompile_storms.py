"""A function that keeps recompiling for calls whose inputs look the same (a value its guards read changes on every
call) is reported once with `RecompileStormWarning`, naming the failing guard and its line; results stay eager's.
Recompiles for new shapes, or one recompile after a cache warms up, are not storms."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from capture_helpers import RecordingBackend

import capture


def _inputs(seed: int, n: int = 4) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def _storms(fn: Any, calls: list[tuple[Any, ...]], reference: Any = None) -> list[warnings.WarningMessage]:
    compiled = capture.optimize(RecordingBackend(), dynamic=False)(fn)
    reference = fn if reference is None else reference
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args in calls:
            got, want = compiled(*args), reference(*args)
            torch.testing.assert_close(got, want)
    return [w for w in caught if issubclass(w.category, capture.RecompileStormWarning)]


class GrowingStore(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.store: dict[str, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.store[f"call{len(self.store)}"] = x.mean()
        return x - 1


def test_a_dict_growing_on_every_call_is_reported_once() -> None:
    module, reference = GrowingStore(), GrowingStore()
    storms = _storms(module, [(_inputs(seed),) for seed in range(10)], reference)
    assert len(storms) == 1
    message = str(storms[0].message)
    assert "DICT_KEYS" in message and "L[0].store" in message
    assert storms[0].filename == __file__  # shown at the line that installed the guard
    assert list(module.store) == list(reference.store)


STATS = {"mean": 0.0}


def running_mean(x: torch.Tensor) -> torch.Tensor:
    STATS["mean"] = 0.9 * STATS["mean"] + 0.1 * float(x.mean())
    return x - STATS["mean"]


def test_a_float_in_a_global_dict_changing_on_every_call_is_reported_once() -> None:
    STATS["mean"] = 0.0
    compiled = capture.optimize(RecordingBackend())(running_mean)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        expected = 0.0
        for seed in range(6):
            x = _inputs(seed)
            expected = 0.9 * expected + 0.1 * float(x.mean())
            torch.testing.assert_close(compiled(x), x - expected)
    storms = [w for w in caught if issubclass(w.category, capture.RecompileStormWarning)]
    assert len(storms) == 1
    assert "CONSTANT_MATCH" in str(storms[0].message) and "G['STATS']['mean']" in str(storms[0].message)


def test_an_int_argument_changing_on_every_call_is_reported_once() -> None:
    def step_scaled(x: torch.Tensor, step: int) -> torch.Tensor:
        return x * step

    storms = _storms(step_scaled, [(_inputs(0), step) for step in range(6)])
    assert len(storms) == 1
    assert "L[1]" in str(storms[0].message)


def test_new_shapes_and_a_warming_cache_are_not_storms() -> None:
    def add_one(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    assert _storms(add_one, [(_inputs(0, n),) for n in range(1, 6)]) == []

    cache: dict[int, torch.Tensor] = {}

    def memoized(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] not in cache:
            cache[x.shape[0]] = torch.arange(x.shape[0], dtype=x.dtype)
        return x + cache[x.shape[0]]

    assert _storms(memoized, [(_inputs(seed),) for seed in range(6)]) == []


def test_an_int_read_from_a_tensor_that_sizes_a_loop_is_reported_once() -> None:
    def repeat_positive(x: torch.Tensor) -> torch.Tensor:
        n = int((x > 0).sum())
        capture.graph_break()
        out = x.clone()
        for i in range(n):  # a Python loop over a run-time count: one compile per count (legitimately)
            out = out + i
        return out

    counts = [torch.full((6,), float(v)) - 0.5 for v in range(6)]  # 0..5 positive entries, same metadata
    ordered = [torch.cat([c[:k].abs(), -c[k:].abs()]) for k, c in enumerate(counts)]
    storms = _storms(repeat_positive, [(x,) for x in ordered])
    assert len(storms) == 1
    assert "== range(" in str(storms[0].message)  # the range the loop ran over, after the break at `range(n)`


def test_a_counter_in_a_closure_cell_is_reported_once() -> None:
    calls = 0

    def counted(x: torch.Tensor) -> torch.Tensor:
        nonlocal calls
        calls += 1
        return x * calls

    compiled = capture.optimize(RecordingBackend())(counted)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(6):
            x = _inputs(seed)
            torch.testing.assert_close(compiled(x), x * (seed + 1))
    storms = [w for w in caught if issubclass(w.category, capture.RecompileStormWarning)]
    assert len(storms) == 1 and "cell_contents" in str(storms[0].message)


def _break_inside_no_grad(x: torch.Tensor) -> torch.Tensor:
    t = x.relu()
    with torch.no_grad():
        capture.graph_break()
        u = t * 2
    return t * 0.5 + u


def test_a_break_inside_a_no_grad_block_compiles_its_resume_function_once() -> None:
    # The resume function takes the with-block's exit (a new GradModeRestorer on every call): guarded
    # by identity, it recompiled on every call until the cache limit, then ran eagerly.
    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=False)(_break_inside_no_grad)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(6):
            x = _inputs(seed).requires_grad_()
            got, want = compiled(x), _break_inside_no_grad(x)
            torch.testing.assert_close(got, want)
            assert torch.is_grad_enabled() and got.requires_grad == want.requires_grad
        count = backend.count
        with torch.no_grad():  # the exit now restores grad off: a real change, compiled once more
            x = _inputs(9)
            torch.testing.assert_close(compiled(x), _break_inside_no_grad(x))
        assert torch.is_grad_enabled()
    assert count <= 3, count
    assert not [w for w in caught if issubclass(w.category, capture.RecompileStormWarning)]
