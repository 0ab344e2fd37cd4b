"""Dynamic shapes in capture: symbolic sizes, traced size arithmetic, size guards, automatic dynamic."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend

import capture


class FakeRecordingBackend(RecordingBackend):
    """Records graphs and the example inputs the backend got (fakes with symbolic sizes when dynamic)."""

    def __init__(self) -> None:
        super().__init__()
        self.examples: list[list[Any]] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
        self.examples.append(list(example_inputs))
        return super().__call__(gm, example_inputs)


def _symbolic_dims(example: torch.Tensor) -> list[bool]:
    return [isinstance(n, torch.SymInt) and not isinstance(n.node.expr, int) and not n.node.expr.is_number
            for n in example.shape]


def test_dynamic_true_compiles_once_for_every_size() -> None:
    def toy(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.sin()
        return y, y.cos()

    backend = FakeRecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(toy)
    for shape in [(8, 10), (3, 7), (5, 5), (64, 2), (2, 33)]:
        x = torch.randn(shape)
        y, z = compiled(x)
        torch.testing.assert_close(y, x.sin())
        torch.testing.assert_close(z, x.sin().cos())
    assert backend.count == 1
    (fake,) = backend.examples[0]
    assert _symbolic_dims(fake) == [True, True]


def test_size_arithmetic_is_traced_not_specialized() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        n = x.shape[0]
        assert x.shape[0] == y.shape[0]
        doubled = x.size(1) * 2
        scaled = x.view(n, -1, 2).sum(-1) / x.shape[-1] ** 0.5
        return scaled + y[:, : x.size(1) // 2], doubled, n

    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(f)
    for rows, cols in [(4, 6), (7, 10), (9, 4), (3, 12)]:
        x, y = torch.randn(rows, cols), torch.randn(rows, cols)
        out, doubled, n = compiled(x, y)
        expected = x.view(rows, -1, 2).sum(-1) / cols**0.5 + y[:, : cols // 2]
        torch.testing.assert_close(out, expected)
        assert (doubled, n) == (2 * cols, rows)
    assert backend.count == 1
    targets = [n.target for n in backend.graphs[0].graph.nodes if n.op in ("call_method", "call_function")]
    assert "size" in targets  # sizes are read inside the graph, not baked in


def test_guard_on_relied_relation_recompiles_only_when_it_breaks() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y  # broadcasting relies on x.size(0) == y.size(0)

    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(f)
    for n in (3, 5, 8):
        x, y = torch.randn(n, 4), torch.randn(n, 4)
        torch.testing.assert_close(compiled(x, y), x + y)
    assert backend.count == 1
    x, y = torch.randn(6, 4), torch.randn(1, 4)  # a broadcast the first graph did not cover
    torch.testing.assert_close(compiled(x, y), x + y)
    assert backend.count == 2


def test_branch_on_size_specializes_with_a_guard() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:
            return x * 2
        return x - 1

    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(f)
    for n in (5, 9, 6):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 1
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f(x))
    assert backend.count == 2


def test_range_over_a_size_specializes() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        total = x[0]
        for i in range(1, x.size(0)):
            total = total + x[i]
        return total

    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(f)
    for n in (3, 3, 4):
        x = torch.randn(n, 5)
        torch.testing.assert_close(compiled(x), x.sum(0))
    assert backend.count == 2  # one graph per length: the loop was unrolled


def test_sizes_zero_and_one_are_specialized() -> None:
    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(lambda x: x * 3)
    for n in (4, 7):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), x * 3)
    assert backend.count == 1
    one = torch.randn(1)
    torch.testing.assert_close(compiled(one), one * 3)
    assert backend.count == 2


def test_returned_and_math_sizes_are_rebuilt_from_inputs() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, float, int]:
        scale = math.sqrt(x.shape[-1])
        return x / scale, scale, max(x.size(0), x.size(1))

    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(f)
    for shape in [(3, 16), (5, 9), (12, 4)]:
        x = torch.randn(shape)
        out, scale, biggest = compiled(x)
        torch.testing.assert_close(out, x / math.sqrt(shape[1]))
        assert scale == pytest.approx(math.sqrt(shape[1]))
        assert biggest == max(shape)
    assert backend.count == 1


def test_automatic_dynamic_compiles_static_then_dynamic() -> None:
    backend = FakeRecordingBackend()
    compiled = capture.optimize(backend)(lambda x, w: torch.tanh(x @ w))
    w = torch.randn(8, 3)
    for n in (4, 6, 9, 17, 4, 33):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x, w), torch.tanh(x @ w))
    assert backend.count == 2
    assert [_symbolic_dims(t) for t in backend.examples[1]] == [[True, False], [False, False]]


def test_dynamic_false_never_goes_dynamic() -> None:
    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=False)(lambda x: x + 1)
    for n in (4, 6, 9):
        x = torch.randn(n)
        torch.testing.assert_close(compiled(x), x + 1)
    assert backend.count == 3


def test_mark_dynamic_and_mark_static() -> None:
    backend = FakeRecordingBackend()
    compiled = capture.optimize(backend, dynamic=False)(lambda x: x.relu())
    x = torch.randn(5, 6)
    capture.mark_dynamic(x, 0)
    torch.testing.assert_close(compiled(x), x.relu())
    assert _symbolic_dims(backend.examples[0][0]) == [True, False]
    other = torch.randn(11, 6)
    torch.testing.assert_close(compiled(other), other.relu())
    assert backend.count == 1

    backend2 = FakeRecordingBackend()
    compiled2 = capture.optimize(backend2, dynamic=True)(lambda x: x.relu())
    y = torch.randn(5, 6)
    capture.mark_static(y, 1)
    torch.testing.assert_close(compiled2(y), y.relu())
    assert _symbolic_dims(backend2.examples[0][0]) == [True, False]
    with pytest.raises(capture.CaptureError, match="out of range"):
        capture.mark_dynamic(y, 3)


def test_module_attributes_stay_static_under_dynamic_true() -> None:
    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.randn(6))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.table

    backend = FakeRecordingBackend()
    module = Scale()
    compiled = capture.optimize(backend, dynamic=True)(module)
    for n in (3, 8):
        x = torch.randn(n, 6)
        torch.testing.assert_close(compiled(x), module(x))
    assert backend.count == 1
    buffers = [n for n in backend.graphs[0].graph.nodes if n.op == "get_attr"]
    assert len(backend.examples[0]) == 1 and len(buffers) == 1  # the buffer is a static graph constant


def test_symbolic_sizes_across_a_graph_break() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        y = x.sin()
        capture.graph_break()
        return y.view(n, -1) * n

    backend = RecordingBackend()
    compiled = capture.optimize(backend, dynamic=True)(f)
    for shape in [(4, 3), (6, 5)]:
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), f(x))
    first_graphs = backend.count
    x = torch.randn(8, 2)
    torch.testing.assert_close(compiled(x), f(x))
    assert first_graphs >= 1


def test_explain_shows_size_guards_with_their_lines() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], -1, 2)

    x = torch.randn(4, 6)
    explanation = capture.explain(f, x)
    assert "test_dynamic.py" in str(explanation)
