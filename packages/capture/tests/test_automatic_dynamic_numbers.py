"""Automatic dynamic for int and float arguments: a number argument that changed once is read as a graph input from
then on (a learning rate, a step counter), so new values compile nothing new; where the trace needs its value (a
branch, a size) it stays specialized. Results are eager's, bit for bit."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend, ops, placeholders

import capture


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    capture.reset()


def _run(fn: Callable[..., Any], calls: list[tuple[Any, ...]], **options: Any) -> tuple[RecordingBackend, list[Any]]:
    """Each call compiled and eager, results compared exactly; the backend and the storm warnings."""
    backend = RecordingBackend()
    compiled = capture.optimize(backend, **options)(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args in calls:
            got, want = compiled(*args), fn(*args)
            _assert_same(got, want)
    return backend, [w for w in caught if issubclass(w.category, capture.RecompileStormWarning)]


def _assert_same(got: Any, want: Any) -> None:
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for a, b in zip(got, want):
            _assert_same(a, b)
    elif isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and torch.equal(got, want), (got, want)
    else:
        assert type(got) is type(want) and got == want, (got, want)


def _x(seed: int, n: int = 8) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def scaled(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x * scale


def stepped(x: torch.Tensor, step: int) -> torch.Tensor:
    return x + step * 2


def test_a_float_argument_changing_on_every_call_compiles_twice() -> None:
    # Before: one compile per value (6), a RecompileStormWarning, then eager at the cache limit.
    backend, storms = _run(scaled, [(_x(i), 0.1 * (i + 1)) for i in range(6)])
    assert backend.count == 2 and not storms
    assert len(placeholders(backend.graphs[1])) == 2  # x, and the scale as a 0-d float64 input


def test_an_int_argument_changing_on_every_call_compiles_twice() -> None:
    backend, storms = _run(stepped, [(_x(i), i + 3) for i in range(6)])
    assert backend.count == 2 and not storms
    backend, storms = _run(stepped, [(_x(i).long(), 10**12 * i) for i in range(6)])  # an integer tensor: int64 stays
    assert backend.count == 2 and not storms


def test_numbers_that_change_together_compile_twice() -> None:
    def sgd_step(p: torch.Tensor, g: torch.Tensor, lr: float, step: int) -> torch.Tensor:
        return p - lr * g / (1 + step)

    backend, _ = _run(sgd_step, [(_x(i), _x(i + 9), 0.01 * (i + 1), i) for i in range(6)])
    assert backend.count == 2


def test_python_arithmetic_on_numbers_is_computed_as_python_computes_it() -> None:
    # `lr / 3`, `0.999 ** step`, `math.sqrt(...)` on the inputs are computed by the entry in Python (an input of the
    # graph, or the value returned), not by graph nodes a backend would compute its own way (in float32, say).
    def adam_like(x: torch.Tensor, lr: float, step: int) -> tuple[torch.Tensor, float, int]:
        correction = math.sqrt(1 - 0.999 ** step) / (1 - 0.9 ** step)
        return x * lr * correction, lr / 3, max(step, 2) * 5

    backend, _ = _run(adam_like, [(_x(i), 0.01 * (i + 1), i + 1) for i in range(6)])
    assert backend.count == 2
    graph = backend.graphs[1]
    numbers = [node.target for node in graph.graph.nodes if node.op == "call_function" and
               isinstance(node.meta.get("example_value"), (torch.SymInt, torch.SymFloat))]
    assert numbers == [] and ops(graph).count("item") == 2, graph.code  # lr, and the correction from step


def test_a_number_in_python_control_flow_stays_specialized() -> None:
    def branchy(x: torch.Tensor, n: int) -> torch.Tensor:
        if n > 3:
            return x * 2
        return x - n

    backend, storms = _run(branchy, [(_x(i), i) for i in range(6)])
    assert backend.count == 6 and len(storms) == 1  # one graph per value: the branch reads it

    def threshold(x: torch.Tensor, t: float) -> torch.Tensor:
        return x.clamp(min=-t) if t < 0.35 else x * t

    _run(threshold, [(_x(i), 0.1 * i) for i in range(6)])


def test_a_number_that_sizes_a_tensor_stays_specialized() -> None:
    def prefix(x: torch.Tensor, n: int) -> torch.Tensor:
        return x[:n] * 2 + torch.arange(n)

    backend, _ = _run(prefix, [(_x(i), i + 1) for i in range(6)])
    assert backend.count == 6
    for graph in backend.graphs:
        assert len(placeholders(graph)) == 1  # the size is a constant of each graph


def test_a_number_passed_over_a_graph_break() -> None:
    def logged(x: torch.Tensor, lr: float) -> torch.Tensor:
        y = x * lr
        print(end="")  # a graph break: lr reaches the resume function
        return y + lr / 2

    backend, _ = _run(logged, [(_x(i), 0.3 * (i + 1)) for i in range(6)])
    assert backend.count == 4  # two for the function, two for its resume function


def test_a_module_forward_with_a_float_argument() -> None:
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor, temperature: float) -> torch.Tensor:
            return torch.softmax(self.linear(x) / temperature, dim=-1)

    module = Scaled()
    backend, _ = _run(module, [(_x(i).view(1, 8), 0.5 + i) for i in range(6)])
    assert backend.count == 2


def test_dynamic_false_keeps_numbers_specialized() -> None:
    backend, storms = _run(scaled, [(_x(i), 0.1 * (i + 1)) for i in range(6)], dynamic=False)
    assert backend.count == 6 and len(storms) == 1


def test_a_number_needed_inside_a_try_block_is_not_an_exception_of_the_program() -> None:
    # `range(n)` of an input number raised capture's data-dependent error inside the trace, and the trace continued
    # at the user's `except Exception:` with it: k was -1 on every call from the second compile on.
    def guarded_range(x: torch.Tensor, n: int) -> torch.Tensor:
        try:
            k = len(range(n))
        except Exception:
            k = -1
        return x * k

    def guarded_round(x: torch.Tensor, s: float) -> torch.Tensor:
        try:
            k = round(s, 1)
        except Exception:
            k = -1.0
        return x * k

    _run(guarded_range, [(_x(i), i) for i in range(5)])
    _run(guarded_round, [(_x(i), 0.37 * i) for i in range(5)])


def test_a_number_read_from_a_tensor_needed_inside_a_try_block() -> None:
    def counted(x: torch.Tensor) -> torch.Tensor:
        n = int((x > 0).sum().item())
        try:
            k = len(range(n))
        except Exception:
            k = -1
        return x * k

    _run(counted, [(_x(i),) for i in range(3)])


def test_a_number_in_a_closure_cell_rebound_before_a_break() -> None:
    # `n` is a cell (the lambda reads it) rebound to `int(n / 2)` after a break; the argument of the breaking call was
    # rebuilt as that arithmetic over the cell's contents after the cell's new value was stored: int(-1 / 2) = 0
    # printed where eager printed -1 (fuzz seed 58259).
    printed: list[Any] = []
    note = capture.disable(printed.append)  # a graph break at the call, taking n: what print does

    def halve(x: torch.Tensor, n: int) -> torch.Tensor:
        scaled = lambda a: a * n  # noqa: E731
        y = scaled(x)
        capture.graph_break()  # the resume function takes n in its cell
        n = int(n / 2)
        note(n)
        return y + n

    compiled = capture.optimize(RecordingBackend())(halve)
    for i, n in enumerate((3, 3, -2, -2, -6, 7)):
        x = _x(i)
        got = compiled(x, n)
        compiled_printed = printed.pop()
        assert torch.equal(got, halve(x, n)) and compiled_printed == printed.pop() == int(n / 2)


def test_a_float_from_a_tensor_in_a_cell_rebound_before_a_break() -> None:
    printed: list[Any] = []
    note = capture.disable(printed.append)

    def rebind(x: torch.Tensor) -> torch.Tensor:
        v = float(x.sum())
        read_later = lambda: v  # noqa: E731
        print(end="")  # a graph break: v reaches the resume function as data, in its cell
        w = v
        v = 2.0
        note(w)
        return x * read_later() + w

    compiled = capture.optimize(RecordingBackend())(rebind)
    for i in range(3):
        x = _x(i)
        got = compiled(x)
        compiled_printed = printed.pop()
        assert torch.equal(got, rebind(x)) and compiled_printed == printed.pop() == float(x.sum())
