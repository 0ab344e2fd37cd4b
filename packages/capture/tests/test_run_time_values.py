"""Values holding run-time data that cross a graph break (a float read from a tensor, a string formatted from
one, a disabled function's result) reach the resume function, or a callee that broke and is captured on its
own, as inputs: calling again with new data compiles nothing new. Real changes (an argument's value, a type)
still recompile."""

from __future__ import annotations

import contextlib
import io
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from capture_helpers import RecordingBackend

import capture
from capture.events import CaptureHooks, Recompiled


def _inputs(seed: int, n: int = 6) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def _compile(fn: Callable[..., Any]) -> tuple[RecordingBackend, list[Recompiled], Any]:
    backend = RecordingBackend()
    recompiles: list[Recompiled] = []
    return backend, recompiles, capture.optimize(backend, hooks=CaptureHooks(on_recompile=[recompiles.append]))(fn)


def _same(got: Any, want: Any) -> None:
    if isinstance(want, np.generic):
        assert type(got) is type(want) and got == pytest.approx(want, rel=1e-6)
    elif isinstance(want, (str, int)):
        assert got == want
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-6)
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for key in want:
            _same(got[key], want[key])
    elif isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for a, b in zip(got, want):
            _same(a, b)
    else:
        torch.testing.assert_close(got, want)


@capture.disable
def _mean_magnitude(t: torch.Tensor) -> float:
    return float(t.abs().mean())


def item_then_break(x: torch.Tensor) -> Any:
    s = x.sum().item()
    capture.graph_break()
    return x + s, s


def float_then_print(x: torch.Tensor) -> Any:
    s = float(x.sum())
    print("sum", s)
    return x * s


def branch_after_break(x: torch.Tensor) -> Any:
    s = x.max().item()
    capture.graph_break()
    if s > 0.5:
        return x + 1
    return x - 1


def arithmetic_across_two_breaks(x: torch.Tensor, scale: float = 2.0) -> Any:
    s = x.mean().item()
    capture.graph_break()
    t = x * scale
    capture.graph_break()
    return t - s, s * scale, math.sqrt(abs(s))


def closure_over_item(x: torch.Tensor) -> Any:
    s = x.mean().item()
    capture.graph_break()

    def shift(y: torch.Tensor) -> torch.Tensor:
        return y - s

    return shift(x)


def metrics_dict_printed(x: torch.Tensor) -> Any:
    metrics = {"loss": (x ** 2).mean().item(), "max": x.max().item()}
    print(metrics)
    return x * metrics["loss"], metrics


def tuple_of_items(x: torch.Tensor) -> Any:
    low_high = (x.min().item(), x.max().item())
    capture.graph_break()
    low, high = low_high
    return (x - low) / (high - low)


def formatted_loss(x: torch.Tensor) -> Any:
    loss = (x ** 2).mean()
    print(f"loss={loss.item():.4f}")
    return loss * 2


def disabled_function_result(x: torch.Tensor) -> Any:
    v = _mean_magnitude(x)
    return x / v, v


class Normalize(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = x.std().item()
        capture.graph_break()
        self.last_std = std
        return x / (std + 1e-5)


def _log_metric(name: str, value: float) -> None:
    print(name, value)


def metric_logged_by_a_helper(x: torch.Tensor) -> Any:
    loss = (x ** 2).mean()
    _log_metric("loss", loss.item())
    return loss * 2


def _scale_by(t: torch.Tensor, s: float, *, shift: float = 0.0) -> torch.Tensor:
    capture.graph_break()
    return t * s + shift


def helper_that_breaks_takes_items(x: torch.Tensor) -> Any:
    return _scale_by(x, x.std().item(), shift=x.mean().item()) + 1


def numpy_sum_then_break(x: torch.Tensor) -> Any:
    total = np.sum(x.numpy() ** 2)
    capture.graph_break()
    return x * float(total), total


def tolist_then_break(x: torch.Tensor) -> Any:
    values = x.tolist()
    capture.graph_break()
    return x * values[0] + values[1]


PROGRAMS = [item_then_break, float_then_print, branch_after_break, arithmetic_across_two_breaks, closure_over_item,
            metrics_dict_printed, tuple_of_items, formatted_loss, disabled_function_result, metric_logged_by_a_helper,
            helper_that_breaks_takes_items, numpy_sum_then_break, tolist_then_break]


@pytest.mark.parametrize("fn", PROGRAMS, ids=[fn.__name__ for fn in PROGRAMS])
def test_run_time_data_across_a_break_compiles_once(fn: Callable[..., Any]) -> None:
    backend, recompiles, compiled = _compile(fn)
    counts = []
    with contextlib.redirect_stdout(io.StringIO()):
        for seed in range(6):  # fresh data: every value that crosses the break is new
            x = _inputs(seed)
            _same(compiled(x), fn(x))
            counts.append(backend.count)
    assert recompiles == []
    assert counts[1:] == counts[:1] * 5, counts


def test_branch_on_a_value_after_the_break_takes_each_side() -> None:
    backend, recompiles, compiled = _compile(branch_after_break)
    counts = []
    for seed in range(8):
        x = _inputs(seed) * (1 if seed % 2 else -1)
        _same(compiled(x), branch_after_break(x))
        counts.append(backend.count)
    assert recompiles == []
    assert counts[2:] == counts[1:2] * 6, counts  # each side compiled once, on its first call


def test_module_storing_a_float_read_from_a_tensor_compiles_once() -> None:
    module = Normalize()
    reference = Normalize()
    backend, recompiles, compiled = _compile(module)
    for seed in range(5):
        x = _inputs(seed)
        _same(compiled(x), reference(x))
        assert module.last_std == pytest.approx(reference.last_std)
    assert recompiles == []
    assert backend.count == 2


def test_a_float_argument_still_recompiles_when_it_changes() -> None:
    _backend, recompiles, compiled = _compile(arithmetic_across_two_breaks)
    x = _inputs(0)
    _same(compiled(x, 2.0), arithmetic_across_two_breaks(x, 2.0))
    _same(compiled(x, 3.0), arithmetic_across_two_breaks(x, 3.0))
    assert any("== 2.0" in r.failed_guard for r in recompiles)


def test_another_type_at_a_run_time_path_recompiles() -> None:
    @capture.disable
    def measure(t: torch.Tensor, as_int: bool) -> float | int:
        return int(t.argmax()) if as_int else float(t.sum())

    def fn(x: torch.Tensor, as_int: bool) -> Any:
        v = measure(x, as_int)
        return x * v, v

    _backend, recompiles, compiled = _compile(fn)
    for seed, as_int in [(0, False), (1, False), (2, True), (3, False)]:
        x = _inputs(seed)
        _same(compiled(x, as_int), fn(x, as_int))
    assert any("TYPE_MATCH" in r.failed_guard for r in recompiles)


def test_an_int_read_from_a_tensor_is_an_input_once_it_changes() -> None:
    def fn(x: torch.Tensor) -> Any:
        n = int((x > 0).sum())
        capture.graph_break()
        return x * n, n

    backend, _recompiles, compiled = _compile(fn)
    counts = []
    for seed in range(8):  # several distinct counts
        x = _inputs(seed)
        _same(compiled(x), fn(x))
        counts.append(backend.count)
    assert len({int((_inputs(seed) > 0).sum()) for seed in range(8)}) > 2
    assert counts[-1] == counts[2], counts  # one recompile for the first change, none after


def test_a_helper_called_with_constants_elsewhere_stays_correct() -> None:
    def fn(x: torch.Tensor) -> Any:
        return _scale_by(x, x.std().item()) + _scale_by(x, 0.5, shift=2.0)

    backend, _recompiles, compiled = _compile(fn)
    counts = []
    for seed in range(5):
        x = _inputs(seed)
        _same(compiled(x), fn(x))
        counts.append(backend.count)
    assert counts[1:] == counts[:1] * 4, counts


def test_run_time_data_carried_through_several_breaks() -> None:
    def fn(x: torch.Tensor) -> Any:
        metrics = {"loss": (x ** 2).mean().item()}
        scale = x.std().item()

        def shift(t: torch.Tensor) -> torch.Tensor:
            return t - scale

        capture.graph_break()
        y = x * 2
        capture.graph_break()  # `metrics` and `scale`'s cell pass through untouched
        return shift(y) * metrics["loss"], metrics

    backend, recompiles, compiled = _compile(fn)
    counts = []
    for seed in range(5):
        x = _inputs(seed)
        _same(compiled(x), fn(x))
        counts.append(backend.count)
    assert recompiles == []
    assert counts[1:] == counts[:1] * 4, counts


def test_an_int_that_varies_is_an_input_in_every_later_resume_function() -> None:
    @capture.disable
    def label(t: torch.Tensor) -> str:
        return f"v{t.sum().item():.2f}"

    def fn(x: torch.Tensor) -> Any:
        text = label(x)
        n = len(text)  # a break: the length is computed in Python
        capture.graph_break()
        y = x * n
        capture.graph_break()
        return y + n, n

    backend, _recompiles, compiled = _compile(fn)
    counts = []
    for seed in range(6):
        x = _inputs(seed)
        _same(compiled(x), fn(x))
        counts.append(backend.count)
    assert len({len(f"v{_inputs(seed).sum().item():.2f}") for seed in range(6)}) > 1
    assert counts[-1] == counts[2], counts  # the resume functions learn once that `n` varies
