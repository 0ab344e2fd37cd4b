"""Every guard records the user source line that installed it; recompiles report guard, value and line."""

from __future__ import annotations

import pytest
import torch
from capture_helpers import RecordingBackend

import capture

SCALE = 2.0


class Gate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.use_gate = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if self.use_gate:  # installs a guard on the attribute
            y = torch.sigmoid(y) * y
        return y


def scaled(x: torch.Tensor, factor: float) -> torch.Tensor:
    y = x * factor  # installs the guard on `factor`
    return y * SCALE  # installs the guard on the global


def _recompiles(fn: object, calls: list[tuple[object, ...]], **options: object) -> list[capture.Recompiled]:
    events: list[capture.Recompiled] = []
    hooks = capture.CaptureHooks()
    hooks.on_recompile.append(events.append)
    compiled = capture.optimize(RecordingBackend(), hooks=hooks, **options)(fn)  # type: ignore[arg-type]
    for args in calls:
        compiled(*args)
    return events


def _line_of(text: str) -> int:
    with open(__file__) as source:
        return next(number for number, line in enumerate(source, 1) if text in line)


def test_constant_and_global_guards_name_their_lines() -> None:
    x = torch.randn(3)
    explanation = capture.explain(scaled, x, 1.5)
    by_kind = {(g.kind, g.source_expr): g for g in explanation.guards}
    factor_guard = by_kind[("CONSTANT_MATCH", "L[1]")]
    assert factor_guard.location is not None and factor_guard.location.lineno == _line_of("y = x * factor")
    global_guard = by_kind[("CONSTANT_MATCH", "G['SCALE']")]
    assert global_guard.location is not None and global_guard.location.lineno == _line_of("return y * SCALE")
    assert "test_guard_sources.py" in str(explanation) and "Installed at" in str(explanation)


def test_module_attribute_guard_reports_its_line_on_recompile() -> None:
    module = Gate()
    x = torch.randn(2, 4)
    events: list[capture.Recompiled] = []
    hooks = capture.CaptureHooks()
    hooks.on_recompile.append(events.append)
    compiled = capture.optimize(RecordingBackend(), hooks=hooks)(module)
    torch.testing.assert_close(compiled(x), module(x))
    module.use_gate = False
    torch.testing.assert_close(compiled(x), module(x))
    (event,) = events
    assert event.guard is not None and "use_gate" in event.guard.source_expr
    assert event.guard_location is not None and event.guard_location.lineno == _line_of("if self.use_gate:")
    assert "use_gate = False" in event.failing_values


def test_tensor_guard_of_an_argument_points_at_its_first_use() -> None:
    events = _recompiles(scaled, [(torch.randn(3), 1.5), (torch.randn(3, dtype=torch.float64), 1.5)])
    (event,) = events
    assert event.guard is not None and event.guard.kind == "TENSOR_MATCH"
    assert event.guard_location is not None and event.guard_location.lineno == _line_of("y = x * factor")
    assert "dtype=torch.float64" in event.failing_values
    assert "y = x * factor" in event.describe()


def test_size_guard_failure_reports_guard_value_and_line() -> None:
    def halves(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] % 2 == 0:  # a branch on a size: a guard on this line
            return x.view(2, -1).sum(0)
        return x * 2

    events = _recompiles(halves, [(torch.randn(4),), (torch.randn(8),), (torch.randn(5),)], dynamic=True)
    (event,) = events
    assert event.guard is not None and event.guard.kind == "SHAPE"
    assert "L[0].size(0)" in event.guard.code
    assert "L[0].size(0) = 5" in event.failing_values
    assert event.guard_location is not None and event.guard_location.lineno == _line_of("if x.shape[0] % 2 == 0:")


def test_automatic_dynamic_recompile_names_the_changed_size() -> None:
    events = _recompiles(lambda x: x + 1, [(torch.randn(4, 3),), (torch.randn(6, 3),), (torch.randn(9, 3),)])
    (event,) = events
    assert event.guard is not None and event.guard.kind == "TENSOR_MATCH"
    assert "shape=[6, 3]" in event.failing_values


def test_type_guard_names_its_line() -> None:
    def count(x: torch.Tensor, items: object) -> torch.Tensor:
        y = x + 1
        return y * len(items)  # type: ignore[arg-type]  # the first read of `items`

    x = torch.randn(3)
    events = _recompiles(count, [(x, [1, 2]), (x, (1, 2))])
    (event,) = events
    assert event.guard is not None and event.guard.kind == "TYPE_MATCH"
    assert event.guard_location is not None and event.guard_location.lineno == _line_of("return y * len(items)")
    assert "(1, 2)" in event.failing_values


class _Reader(torch.nn.Module):
    """Reads one environment variable in each of several submodules (transformers' attention layers do)."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import os

        for layer in self.layers:
            x = layer(x) * (2 if os.environ.get("KILN_TEST_GUARD_ONCE", "0") == "1" else 3)
        return x


def test_one_object_read_from_several_places_is_guarded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KILN_TEST_GUARD_ONCE", raising=False)
    module = _Reader()
    x = torch.randn(2, 4)
    explanation = capture.explain(module, x)
    environment = [g for g in explanation.guards if g.kind == "ENVIRONMENT"]
    assert len(environment) == 1, [str(g) for g in environment]
    # No guard checks an object the entry itself holds (it is always the same object).
    assert not [g for g in explanation.guards if g.kind in ("ID_MATCH", "TYPE_MATCH") and g.source_expr.startswith("_k")]
    # The one guard still sees a change.
    compiled = capture.optimize(RecordingBackend())(module)
    assert torch.equal(compiled(x), module(x))
    monkeypatch.setenv("KILN_TEST_GUARD_ONCE", "1")
    assert torch.equal(compiled(x), module(x))
