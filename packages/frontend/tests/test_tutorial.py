"""The seed tutorial (tutorial-dynamo-inductor.txt) with `frontend` in place of torch._dynamo, on CPU."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
import scipy.fft
import torch

import frontend

from .models import MLP, MyModule, TinyResNet

pytestmark = pytest.mark.usefixtures("fresh_cache")


def foo(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.sin(x)
    b = torch.cos(x)
    return a + b


def bar(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_optimize_a_function() -> None:
    opt_foo1 = frontend.optimize("inductor")(foo)
    x, y = torch.randn(10, 10), torch.randn(10, 10)
    torch.testing.assert_close(opt_foo1(x, y), foo(x, y))


def test_decorated_function() -> None:
    @frontend.optimize("inductor")
    def opt_foo2(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        a = torch.sin(x)
        b = torch.cos(x)
        return a + b

    x, y = torch.randn(10, 10), torch.randn(10, 10)
    torch.testing.assert_close(opt_foo2(x, y), foo(x, y))


def test_optimize_a_module() -> None:
    mod = MyModule()
    opt_mod = frontend.optimize("inductor")(mod)
    x = torch.randn(10, 100)
    torch.testing.assert_close(opt_mod(x), mod(x))


def test_inference_of_a_resnet_style_net() -> None:
    model = TinyResNet().eval()

    def evaluate(mod: torch.nn.Module, inp: torch.Tensor) -> torch.Tensor:
        return mod(inp)

    eval_opt = frontend.optimize("inductor")(evaluate)
    for _ in range(2):
        inp = torch.randn(4, 3, 16, 16)
        torch.testing.assert_close(eval_opt(model, inp), evaluate(model, inp), rtol=1e-4, atol=1e-4)


def test_data_dependent_control_flow() -> None:
    def f1(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if x.sum() < 0:
            return -y
        return y

    inp1, inp2 = torch.randn(5, 5), torch.randn(5, 5)
    compiled = frontend.optimize("inductor")(f1)
    torch.testing.assert_close(compiled(inp1, inp2), f1(inp1, inp2))
    torch.testing.assert_close(compiled(-inp1, inp2), f1(-inp1, inp2))


def test_python_int_argument() -> None:
    def f2(x: torch.Tensor, y: int) -> torch.Tensor:
        return x + y

    inp = torch.randn(5, 5)
    torch.testing.assert_close(frontend.optimize("inductor")(f2)(inp, 3), f2(inp, 3))


def test_non_pytorch_call() -> None:
    def f3(x: torch.Tensor) -> torch.Tensor:
        x = x * 2
        x = scipy.fft.dct(x.numpy())
        x = torch.from_numpy(np.asarray(x))
        x = x * 2
        return x

    inp = torch.randn(5, 5)
    torch.testing.assert_close(frontend.optimize("inductor")(f3)(inp), f3(inp))


def test_custom_backend_prints_three_graphs_for_bar(capsys: pytest.CaptureFixture[str]) -> None:
    graphs: list[torch.fx.GraphModule] = []

    def custom_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        print("custom backend called with FX graph:")
        if importlib.util.find_spec("tabulate") is not None:
            gm.graph.print_tabular()
        else:  # print_tabular needs the optional `tabulate` package
            print(gm.graph)
        graphs.append(gm)
        return gm.forward

    opt_bar = frontend.optimize(custom_backend)(bar)
    inp1, inp2 = torch.randn(10), torch.randn(10)
    inp2 = inp2.abs() + 0.1  # b.sum() > 0 first, then < 0: both branches
    torch.testing.assert_close(opt_bar(inp1, inp2), bar(inp1, inp2))
    torch.testing.assert_close(opt_bar(inp1, -inp2), bar(inp1, -inp2))
    assert len(graphs) == 3
    assert capsys.readouterr().out.count("custom backend called with FX graph:") == 3


def test_explain_reports_the_graph_break_with_the_user_line() -> None:
    explanation = frontend.explain(bar, torch.randn(10), torch.randn(10))
    assert explanation.graph_count == 2
    assert explanation.graph_break_count == 1
    text = str(explanation)
    assert "test_tutorial.py" in text
    assert "if b.sum() < 0" in text


def test_nopython_raises_naming_the_line() -> None:
    opt_bar = frontend.optimize("inductor", nopython=True)(bar)
    with pytest.raises(Exception) as info:
        opt_bar(torch.randn(10), torch.randn(10))
    assert "if b.sum() < 0" in str(info.value) or "test_tutorial.py" in str(info.value)


def test_nopython_on_a_model_without_breaks() -> None:
    model = TinyResNet().eval()
    opt_model = frontend.optimize("inductor", nopython=True)(model)
    inp = torch.randn(2, 3, 16, 16)
    torch.testing.assert_close(opt_model(inp), model(inp), rtol=1e-4, atol=1e-4)


def test_export() -> None:
    with pytest.raises(Exception, match=r"b\.sum"):
        frontend.export(bar, torch.randn(10), torch.randn(10))
    model = TinyResNet().eval()
    model_exp = frontend.export(model, torch.randn(2, 3, 16, 16))
    graph_module = model_exp[0]
    inp = torch.randn(2, 3, 16, 16)
    out = graph_module(inp)
    out = out[0] if isinstance(out, (list, tuple)) else out
    torch.testing.assert_close(out, model(inp))


def test_training_loop_with_backward_inside_the_compiled_function() -> None:
    torch.manual_seed(0)
    model, reference = MLP(), MLP()
    reference.load_state_dict(model.state_dict())
    opt = torch.optim.Adam(model.parameters())
    reference_opt = torch.optim.Adam(reference.parameters())

    def train(mod: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> None:
        pred = mod(data[0])
        loss = torch.nn.CrossEntropyLoss()(pred, data[1])
        loss.backward()

    train_opt = frontend.optimize("inductor")(train)
    for _ in range(2):
        data = (torch.randn(8, 16), torch.randint(4, (8,)))
        opt.zero_grad(True)
        reference_opt.zero_grad(True)
        train_opt(model, data)
        train(reference, data)
        for p, q in zip(model.parameters(), reference.parameters()):
            assert p.grad is not None
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
        opt.step()
        reference_opt.step()
