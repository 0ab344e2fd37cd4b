"""Data-dependent values in capture: `item()`/`tolist()` and ops with data-dependent output sizes stay
in the graph as unbacked symbols; a Python branch on one is a graph break at that line."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend, ops

import capture
from capture import CaptureConfig
from capture.errors import GraphBreakError


def _run(fn: Any, *args: Any, config: CaptureConfig | None = None, dynamic: bool | None = None,
         nopython: bool = False) -> tuple[RecordingBackend, Any]:
    backend = RecordingBackend()
    compiled = capture.optimize(backend, config=config, dynamic=dynamic, nopython=nopython)(fn)
    return backend, compiled


def _inputs(seed: int) -> torch.Tensor:
    return torch.randn(6, 5, generator=torch.Generator().manual_seed(seed))


@pytest.mark.fake_unique_int64
@pytest.mark.parametrize("dynamic", [False, True])
def test_dynamic_output_shape_ops_are_one_graph_for_every_result_size(dynamic: bool) -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        rows = torch.nonzero(x > 0)
        positive = x[x > 0]
        values, counts = torch.unique(x.round(), return_counts=True)
        return rows.float().sum(0) + positive.numel(), positive * 2, values, counts, torch.masked_select(x, x < 0)

    backend, compiled = _run(fn, dynamic=dynamic, nopython=True)
    for seed in range(4):  # fresh values: each call has other result sizes
        x = _inputs(seed)
        torch.testing.assert_close(compiled(x), fn(x))
    assert backend.count == 1


def test_item_feeds_arithmetic_and_a_size_in_one_graph() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, float]:
        n = x.abs().sum().long().item()
        scale = x.max().item()
        return torch.ones(n + 1) * scale + x.mean(), scale * 2

    backend, compiled = _run(fn, nopython=True)
    for seed in range(3):
        x = _inputs(seed)
        got, want = compiled(x), fn(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == pytest.approx(want[1])
    assert backend.count == 1
    assert "item" in ops(backend.graphs[0])


def test_tolist_of_counts_feeds_split() -> None:
    def fn(x: torch.Tensor, expert: torch.Tensor) -> list[torch.Tensor]:
        counts = torch.nn.functional.one_hot(expert, 3).sum(0)
        parts = torch.split(x[torch.argsort(expert, stable=True)], counts.tolist())
        return [p.sum(0) * (k + 1) for k, p in enumerate(parts)]

    backend, compiled = _run(fn, nopython=True)
    generator = torch.Generator().manual_seed(0)
    for _ in range(3):
        x, expert = torch.randn(10, 4, generator=generator), torch.randint(0, 3, (10,), generator=generator)
        torch.testing.assert_close(compiled(x, expert), fn(x, expert))
    assert backend.count == 1


def test_branch_on_an_item_is_a_graph_break_at_that_line() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        total = y.sum().item()
        if total > 0:  # the branch line
            return y + 1
        return y - 1

    explained = capture.explain(fn, _inputs(0))
    assert explained.graph_break_count == 1
    reason = explained.break_reasons[0]
    assert "data-dependent control flow" in reason.reason
    assert "if total > 0" in str(reason)
    _backend, compiled = _run(fn)
    for seed in range(4):
        x = _inputs(seed)
        torch.testing.assert_close(compiled(x), fn(x))
    with pytest.raises(GraphBreakError, match="data-dependent control flow"):
        _run(fn, nopython=True)[1](_inputs(0))


def test_range_over_an_item_is_a_graph_break() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        n = (x > 0).sum().item()
        for _ in range(n):
            x = x + 1
        return x

    _backend, compiled = _run(fn)
    for seed in range(3):
        x = _inputs(seed)
        torch.testing.assert_close(compiled(x), fn(x))


def test_switches_off_make_graph_breaks_at_the_call() -> None:
    def with_item(x: torch.Tensor) -> torch.Tensor:
        return x * x.sum().item()

    def with_nonzero(x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x).sum()

    off = CaptureConfig(capture_scalar_outputs=False, capture_dynamic_output_shape_ops=False)
    with pytest.raises(GraphBreakError, match="item"):
        _run(with_item, config=off, nopython=True)[1](_inputs(0))
    with pytest.raises(GraphBreakError, match="nonzero"):
        _run(with_nonzero, config=off, nopython=True)[1](_inputs(0))
    _backend, compiled = _run(with_nonzero, config=off)
    torch.testing.assert_close(compiled(_inputs(1)), with_nonzero(_inputs(1)))


def test_equal_allclose_and_tensor_split_by_a_tensor_stay_in_the_graph() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor, cuts: torch.Tensor) -> tuple[Any, ...]:
        return (torch.equal(x, y), x.equal(x), torch.equal(x, x[:2]), torch.allclose(x, y, atol=0.5),
                torch.tensor_split(x, cuts, dim=1))

    backend, compiled = _run(fn, nopython=True)
    for seed in range(3):
        x = _inputs(seed)
        y = x + (0.1 if seed else 0.0)
        cuts = torch.tensor([1, 3 + seed % 2])
        got, want = compiled(x, y, cuts), fn(x, y, cuts)
        assert got[:4] == want[:4]
        torch.testing.assert_close(got[4], want[4])
    assert backend.count == 1


def test_float_and_int_of_a_one_element_tensor_stay_in_the_graph() -> None:
    def fn(x: torch.Tensor) -> tuple[Any, ...]:
        total = float(x.sum())
        count = float((x > 0).sum())  # an integer tensor: float of its item
        scaled = int(x.abs().max() * 10)  # a float tensor: int truncates toward zero
        return x * total + scaled, count, scaled, int(x.sum() * 3)

    backend, compiled = _run(fn, nopython=True)
    for seed in range(3):
        x = _inputs(seed)
        got, want = compiled(x), fn(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:] and [type(v) for v in got[1:]] == [type(v) for v in want[1:]]
    assert backend.count == 1
    assert ops(backend.graphs[0]).count("item") == 4


def test_float_of_a_tensor_of_several_elements_raises_eagers_error() -> None:
    def fn(x: torch.Tensor) -> float:
        return float(x)

    _, compiled = _run(fn)
    with pytest.raises((ValueError, RuntimeError), match="one element"):
        compiled(_inputs(0))
