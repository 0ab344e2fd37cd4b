"""Every capture example of the seeds (tutorial, talk, Dynamo update 5)."""

from __future__ import annotations

import operator

import pytest
import scipy.fft
import torch
from capture_helpers import RecordingBackend, ops, placeholders

import capture


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    capture.reset()


def foo(x, y):
    a = torch.sin(x)
    b = torch.cos(x)
    return a + b


def test_optimize_function_and_decorator() -> None:
    backend = RecordingBackend()
    opt_foo1 = capture.optimize(backend)(foo)
    x, y = torch.randn(10, 10), torch.randn(10, 10)
    torch.testing.assert_close(opt_foo1(x, y), foo(x, y))

    @capture.optimize(backend)
    def opt_foo2(x, y):
        a = torch.sin(x)
        b = torch.cos(x)
        return a + b

    torch.testing.assert_close(opt_foo2(x, y), foo(x, y))
    assert backend.count == 2
    assert ops(backend.graphs[0]) == [torch.sin, torch.cos, operator.add]


class MyModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)

    def forward(self, x):
        return torch.nn.functional.relu(self.lin(x))


def test_my_module() -> None:
    backend = RecordingBackend()
    mod = MyModule()
    opt_mod = capture.optimize(backend)(mod)
    x = torch.randn(10, 100)
    torch.testing.assert_close(opt_mod(x), mod(x))
    assert backend.count == 1
    assert ops(backend.graphs[0]) == ["self_lin", torch.nn.functional.relu]
    # behaves like the module
    assert opt_mod.lin is mod.lin
    assert set(opt_mod.state_dict()) == {"lin.weight", "lin.bias"}
    assert len(list(opt_mod.parameters())) == 2
    opt_mod.eval()
    assert not mod.training
    torch.testing.assert_close(opt_mod(x), mod(x))


def bar(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_toy_example_three_graphs_both_branches() -> None:
    backend = RecordingBackend()
    toy_example = capture.optimize(backend)(bar)
    for _ in range(20):
        a, b = torch.randn(10), torch.randn(10)
        torch.testing.assert_close(toy_example(a, b), bar(a, b))
        torch.testing.assert_close(toy_example(a, -b), bar(a, -b))
    assert backend.count == 3
    first, *rest = backend.graphs
    assert ops(first) == [torch.abs, operator.add, operator.truediv, "sum", operator.lt]
    assert placeholders(first) == ["a", "b"]
    bodies = sorted(tuple(ops(g)) for g in rest)
    assert bodies == [(operator.mul,), (operator.mul, operator.mul)]
    for g in rest:
        assert placeholders(g) == ["b", "x"]


def test_toy_example_graph_outputs_match_talk() -> None:
    backend = RecordingBackend()
    capture.optimize(backend)(bar)(torch.randn(10), torch.randn(10))
    output = next(n for n in backend.graphs[0].graph.nodes if n.op == "output")
    assert [a.name for a in output.args[0]] == ["truediv", "lt"]


def f1(x, y):
    if x.sum() < 0:
        return -y
    return y


def test_tutorial_f1_data_dependent_control_flow() -> None:
    dynamo_f1 = capture.optimize(RecordingBackend())(f1)
    inp1, inp2 = torch.randn(5, 5), torch.randn(5, 5)
    torch.testing.assert_close(dynamo_f1(inp1, inp2), f1(inp1, inp2))
    torch.testing.assert_close(dynamo_f1(-inp1, inp2), f1(-inp1, inp2))


def f2(x, y):
    return x + y


def test_tutorial_f2_int_argument() -> None:
    backend = RecordingBackend()
    dynamo_f2 = capture.optimize(backend)(f2)
    inp1 = torch.randn(5, 5)
    torch.testing.assert_close(dynamo_f2(inp1, 3), f2(inp1, 3))
    assert backend.count == 1
    torch.testing.assert_close(dynamo_f2(inp1, 4), f2(inp1, 4))  # the int is guarded: recompiles
    assert backend.count == 2


def f3(x):
    x = x * 2
    x = scipy.fft.dct(x.numpy())
    x = torch.from_numpy(x)
    x = x * 2
    return x


def test_tutorial_f3_scipy_call() -> None:
    backend = RecordingBackend()
    dynamo_f3 = capture.optimize(backend)(f3)
    for _ in range(3):
        inp = torch.randn(5, 5)
        torch.testing.assert_close(dynamo_f3(inp), f3(inp))
    assert backend.count == 2
    assert all(ops(g) == [operator.mul] for g in backend.graphs)


def test_custom_backend_prints_graphs(capsys: pytest.CaptureFixture[str]) -> None:
    def custom_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
        print("custom backend called with FX graph:")
        print(gm.graph)
        return gm.forward

    opt_bar = capture.optimize(custom_backend)(bar)
    inp1, inp2 = torch.randn(10), torch.randn(10)
    opt_bar(inp1, inp2)
    opt_bar(inp1, -inp2)
    printed = capsys.readouterr().out
    assert printed.count("custom backend called with FX graph:") == 3


def test_explain_bar() -> None:
    explanation = capture.explain(bar, torch.randn(10), torch.randn(10))
    assert explanation.graph_count == 2
    assert explanation.graph_break_count == 1
    reason = explanation.break_reasons[0]
    assert "data-dependent" in reason.reason
    where = reason.location
    assert where is not None and where.filename == __file__
    assert where.source_line == "if b.sum() < 0:"
    text = str(explanation)
    assert "Graph Count: 2" in text and "Graph Break Count: 1" in text and "if b.sum() < 0:" in text
    assert len(explanation.ops_per_graph) == 2
    assert explanation.guards


def test_nopython_raises_with_user_line() -> None:
    opt_bar = capture.optimize(RecordingBackend(), nopython=True)(bar)
    with pytest.raises(capture.GraphBreakError) as info:
        opt_bar(torch.randn(10), torch.randn(10))
    message = str(info.value)
    assert f"{__file__}:" in message and "if b.sum() < 0:" in message


def test_nopython_whole_model() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 10))
    backend = RecordingBackend()
    opt_model = capture.optimize(backend, nopython=True)(model)
    x = torch.randn(4, 3, 16, 16)
    expected = model(x)
    torch.testing.assert_close(opt_model(x), model(x))
    assert expected.shape == (4, 10)
    assert backend.count == 1


def test_export_raises_on_break_and_exports_model() -> None:
    with pytest.raises(capture.GraphBreakError) as info:
        capture.export(bar, torch.randn(10), torch.randn(10))
    assert "if b.sum() < 0:" in str(info.value)
    model = MyModule()
    model_exp = capture.export(model, torch.randn(16, 100))
    x = torch.randn(16, 100)
    torch.testing.assert_close(model_exp[0](x), model(x))
    assert model_exp.guards


global_list: list[torch.Tensor] = []


def update5_foo(a, b):
    x = a + b

    def inner(d):
        return x - d + 2

    x += 1
    return inner(a)


def test_update5_closure_example() -> None:
    backend = RecordingBackend()
    opt = capture.optimize(backend)(update5_foo)
    a, b = torch.rand(10), torch.rand(10)
    torch.testing.assert_close(opt(a, b), update5_foo(a, b))
    assert backend.count == 1


def dtype_branch(x):
    if x.dtype == torch.float32:
        return x + 1
    return x - 1


def test_update5_guard_on_dtype() -> None:
    backend = RecordingBackend()
    opt = capture.optimize(backend)(dtype_branch)
    x = torch.randn(4)
    torch.testing.assert_close(opt(x), dtype_branch(x))
    y = torch.randn(4, dtype=torch.float64)
    torch.testing.assert_close(opt(y), dtype_branch(y))
    assert backend.count == 2


def item_use(x):
    y = x * 2
    scale = y.sum().item()
    return y * scale


def test_update5_item_breaks_graph_without_scalar_outputs() -> None:
    off = capture.CaptureConfig(capture_scalar_outputs=False)
    with capture.config.patch(capture_scalar_outputs=False):
        explanation = capture.explain(item_use, torch.randn(3))
    assert explanation.graph_count == 2
    assert "item" in explanation.break_reasons[0].reason
    x = torch.randn(3)
    torch.testing.assert_close(capture.optimize(RecordingBackend(), config=off)(item_use)(x), item_use(x))


def test_update5_item_stays_in_the_graph_by_default() -> None:
    explanation = capture.explain(item_use, torch.randn(3))
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    x = torch.randn(3)
    torch.testing.assert_close(capture.optimize(RecordingBackend())(item_use)(x), item_use(x))
