"""Guards, recompilation, graph breaks in nested calls, side effects, exceptions, disable/run, the cache limit."""

from __future__ import annotations

import operator
import warnings

import pytest
import torch
from capture_helpers import RecordingBackend, ops

import capture


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    capture.reset()


def make_closure(scale: float):
    offset = torch.randn(4)

    def inner(x):
        return x * scale + offset

    return inner, offset


def test_closure_reads_cells() -> None:
    fn, _ = make_closure(3.0)
    backend = RecordingBackend()
    opt = capture.optimize(backend)(fn)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), fn(x))
    assert backend.count == 1


def helper_with_break(x):
    y = x.cos()
    print("inside helper")
    return y + 1


def calls_helper(x):
    a = x.sin()
    b = helper_with_break(a)
    return b * 2


def test_break_inside_inlined_callee(capsys: pytest.CaptureFixture[str]) -> None:
    backend = RecordingBackend()
    opt = capture.optimize(backend)(calls_helper)
    x = torch.randn(5)
    torch.testing.assert_close(opt(x), calls_helper(x))
    assert capsys.readouterr().out.count("inside helper") == 2
    graph_ops = [ops(g) for g in backend.graphs]
    # caller before the call, the callee captured on its own (two graphs around its print), caller after
    assert ["sin"] in graph_ops and ["cos"] in graph_ops
    assert [operator.add] in graph_ops and [operator.mul] in graph_ops
    explanation = capture.explain(calls_helper, x)
    reason = explanation.break_reasons[0]
    assert "print" in reason.reason
    assert [f.function for f in reason.user_stack] == ["calls_helper", "helper_with_break"]


def add_one(x):
    return x + 1


def test_recompiles_on_dtype_and_shape_change() -> None:
    recompiles: list[capture.Recompiled] = []
    hooks = capture.CaptureHooks(on_recompile=[recompiles.append])
    backend = RecordingBackend()
    opt = capture.optimize(backend, hooks=hooks)(add_one)
    for x in (torch.randn(3), torch.randn(3), torch.randn(3, dtype=torch.float64), torch.randn(7)):
        torch.testing.assert_close(opt(x), add_one(x))
    assert backend.count == 3
    assert len(recompiles) == 2
    assert "dtype" in recompiles[0].failed_guard or "float" in recompiles[0].failed_guard
    assert "shape" in recompiles[1].failed_guard


SCALE = 2.0


def uses_global(x):
    return x * SCALE


def test_changed_global_invalidates_guard() -> None:
    global SCALE
    backend = RecordingBackend()
    opt = capture.optimize(backend)(uses_global)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), x * 2.0)
    SCALE = 5.0
    try:
        torch.testing.assert_close(opt(x), x * 5.0)
    finally:
        SCALE = 2.0
    assert backend.count == 2


class Counter:
    def __init__(self) -> None:
        self.calls = 0


def side_effects(x, log, state, counter):
    log.append(x.sum())
    state["last"] = x * 2
    counter.calls = counter.calls + 1
    return x + 1


def test_side_effects_are_replayed() -> None:
    backend = RecordingBackend()
    opt = capture.optimize(backend)(side_effects)
    x = torch.randn(4)
    log_eager, state_eager, counter_eager = [], {}, Counter()
    log_ours, state_ours, counter_ours = [], {}, Counter()
    expected = side_effects(x, log_eager, state_eager, counter_eager)
    got = opt(x, log_ours, state_ours, counter_ours)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(log_ours, log_eager)
    torch.testing.assert_close(state_ours, state_eager)
    assert counter_ours.calls == counter_eager.calls == 1
    assert backend.count == 1


def shape_mismatch(x, y):
    z = x.sin()
    return z + y


def test_exceptions_propagate_like_eager() -> None:
    opt = capture.optimize(RecordingBackend())(shape_mismatch)
    x, y = torch.randn(3), torch.randn(4)
    with pytest.raises(RuntimeError) as ours:
        opt(x, y)
    with pytest.raises(RuntimeError) as eager:
        shape_mismatch(x, y)
    assert str(ours.value) == str(eager.value)

    def raises_value_error(x):
        if x.shape[0] == 3:
            raise ValueError("three is not allowed")
        return x

    with pytest.raises(ValueError, match="three is not allowed"):
        capture.optimize(RecordingBackend())(raises_value_error)(torch.randn(3))


def test_disable_and_run() -> None:
    calls: list[int] = []

    @capture.disable
    def not_captured(x):
        calls.append(1)
        return x * 3

    def outer(x):
        return not_captured(x.cos()) + 1

    backend = RecordingBackend()
    opt = capture.optimize(backend)(outer)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), outer(x))
    assert backend.count == 2  # cos | disabled call in Python | + 1
    frozen = capture.run(opt)
    before = backend.count
    torch.testing.assert_close(frozen(x), outer(x))
    y = torch.randn(9)
    torch.testing.assert_close(frozen(y), outer(y))  # a new shape: no entry, so it runs eagerly
    assert backend.count == before  # run() never compiles
    assert capture.disable(opt)(x).shape == x.shape


def test_graph_break_and_disallow_in_graph() -> None:
    def explicit(x):
        y = x + 1
        capture.graph_break()
        return y * 2

    assert capture.explain(explicit, torch.randn(3)).graph_count == 2

    def my_op(x):
        return x.exp()

    capture.disallow_in_graph(my_op)

    def uses_my_op(x):
        return my_op(x.sin()).cos()

    explanation = capture.explain(uses_my_op, torch.randn(3))
    assert explanation.graph_break_count == 1 and "disallow_in_graph" in explanation.break_reasons[0].reason


def test_allow_in_graph_is_one_node() -> None:
    def opaque(x):
        return x.relu() * 2

    capture.allow_in_graph(opaque)

    def uses(x):
        return opaque(x) + 1

    backend = RecordingBackend()
    x = torch.randn(5)
    torch.testing.assert_close(capture.optimize(backend)(uses)(x), uses(x))
    assert ops(backend.graphs[0]) == [opaque, operator.add]


def test_cache_limit_warns_once_and_runs_eagerly() -> None:
    backend = RecordingBackend()
    opt = capture.optimize(backend, dynamic=False)(add_one)  # static: every new size recompiles
    with capture.config.patch(cache_size_limit=2), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 6):
            x = torch.randn(n)
            torch.testing.assert_close(opt(x), x + 1)
    assert backend.count == 2
    limit_warnings = [w for w in caught if issubclass(w.category, capture.RecompileLimitWarning)]
    assert len(limit_warnings) == 1
    assert "shape" in str(limit_warnings[0].message)


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 4)])
        self.scale = torch.nn.Parameter(torch.ones(4))

    def forward(self, x):
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index < len(self.layers) - 1:
                x = torch.relu(x)
        return x * self.scale


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                            torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        self.head = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        with torch.no_grad():
            x = x * 1.0
        x = self.features(x)
        return self.head(x.flatten(1))


@pytest.mark.parametrize("make", [MLP, ConvNet])
def test_small_networks_in_one_graph(make) -> None:
    torch.manual_seed(0)
    eager_model, our_model = make(), make()
    our_model.load_state_dict(eager_model.state_dict())
    backend = RecordingBackend()
    opt = capture.optimize(backend)(our_model)
    shape = (8, 16) if make is MLP else (2, 3, 8, 8)
    for _ in range(2):
        x = torch.randn(*shape)
        expected = eager_model(x)
        got = opt(x)
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
    for (name, p_eager), p_ours in zip(eager_model.named_parameters(), our_model.parameters()):
        torch.testing.assert_close(p_ours.grad, p_eager.grad, msg=name)
    torch.testing.assert_close(our_model.state_dict(), eager_model.state_dict())
    assert backend.count == 1


def test_optimize_cannot_be_a_context_manager() -> None:
    with pytest.raises(capture.CaptureError, match="context manager"):
        with capture.optimize(RecordingBackend()):
            pass


def test_hooks_observe_graphs_and_breaks() -> None:
    graphs: list[capture.GraphCompiled] = []
    breaks: list[capture.GraphBroken] = []
    hooks = capture.CaptureHooks(on_graph=[graphs.append], on_graph_break=[breaks.append])

    def f(a, b):
        x = a / (torch.abs(a) + 1)
        if b.sum() < 0:
            b = b * -1
        return x * b

    capture.optimize(RecordingBackend(), hooks=hooks)(f)(torch.randn(10), torch.randn(10))
    assert len(graphs) == 2 and len(breaks) == 1
    assert graphs[0].code_name == "f" and graphs[0].guards
    assert breaks[0].reason.location is not None
