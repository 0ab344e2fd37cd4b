"""torch.autocast regions and @contextlib.contextmanager blocks traced into the graph."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from capture_helpers import RecordingBackend
from torch import nn

import capture


def test_autocast_region_is_traced_into_the_graph() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = x.sin()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            z = y @ w
            q = torch.relu(z)
        return z, q.float() + 1, y @ w

    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(f)
    for _ in range(2):
        x, w = torch.randn(4, 4), torch.randn(4, 4)
        ours, eager = compiled(x, w), f(x, w)
        assert [t.dtype for t in ours] == [t.dtype for t in eager] == [torch.bfloat16, torch.float32, torch.float32]
        for got, want in zip(ours, eager):
            torch.testing.assert_close(got, want)
    assert backend.count == 1
    targets = [n.target for n in backend.graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.amp.autocast_mode._enter_autocast in targets and torch.amp.autocast_mode._exit_autocast in targets
    assert not torch.is_autocast_enabled("cpu")


def test_autocast_disabled_inside_an_autocast_module() -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = self.lin(x)
                with torch.autocast("cpu", enabled=False):
                    g = h.float() @ x.t()
            return h.float() + g.sum()

    model = Model()
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    x = torch.randn(3, 8)
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 1


def test_graph_break_inside_autocast_stays_correct() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ x
            capture.graph_break()
            y = y @ x
        return y

    compiled = capture.optimize("eager")(f)
    x = torch.randn(4, 4)
    ours = compiled(x)
    assert ours.dtype == torch.bfloat16
    torch.testing.assert_close(ours, f(x))


class _Settings:
    scale = 1.0


SETTINGS = _Settings()


@contextlib.contextmanager
def _scaled(value: float) -> Iterator[float]:
    old = SETTINGS.scale
    SETTINGS.scale = value
    try:
        yield value * 2
    finally:
        SETTINGS.scale = old


def test_contextmanager_block_is_one_graph() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        with _scaled(3.0) as offset:
            y = x * SETTINGS.scale + offset
        return y + SETTINGS.scale

    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(f)
    x = torch.randn(5)
    torch.testing.assert_close(compiled(x), x * 3.0 + 6.0 + 1.0)
    torch.testing.assert_close(compiled(x), f(x))
    assert SETTINGS.scale == 1.0
    assert backend.count == 1


def test_contextmanager_method_of_a_module() -> None:
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        @contextlib.contextmanager
        def shifted(self, t: torch.Tensor) -> Iterator[torch.Tensor]:
            yield t.cos()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with self.shifted(x) as shifted:
                return self.lin(shifted)

    model = Model()
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 1


def test_graph_break_inside_contextmanager_block_matches_eager() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        with _scaled(2.0):
            capture.graph_break()
            y = x * SETTINGS.scale
        return y

    compiled = capture.optimize("eager")(f)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), x * 2.0)
    assert SETTINGS.scale == 1.0


def test_outer_autocast_state_is_guarded() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x @ w

    backend = RecordingBackend()
    compiled = capture.optimize(backend)(f)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    assert compiled(x, w).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = compiled(x, w)
        assert ours.dtype == torch.bfloat16
        torch.testing.assert_close(ours, f(x, w))
    assert compiled(x, w).dtype == torch.float32
    assert backend.count == 2  # the entry traced outside autocast is not reused inside it


class CompileTimeGradModeBackend:
    """A backend that decides when compiling, from the grad mode it is compiled in, whether the graph needs a
    backward (as an ahead-of-time autograd compiler does): compiled under no_grad, its outputs have no history."""

    def __init__(self) -> None:
        self.compiled_with_grad: list[bool] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        training = torch.is_grad_enabled()
        self.compiled_with_grad.append(training)
        if training:
            return gm.forward

        def inference(*args: torch.Tensor) -> object:  # an inference graph: its outputs have no autograd history
            outputs = gm.forward(*args)
            return tuple(o.detach() if isinstance(o, torch.Tensor) else o for o in outputs)

        return inference


def _print_inside_no_grad(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    t = x * w
    with torch.no_grad():
        print("inside no_grad", end="")  # a graph break: the resume function starts under no_grad
        u = t * 2
    return ((u * w).sin() + t * t).sum()


def test_a_resume_function_that_leaves_a_no_grad_block_is_compiled_with_grad() -> None:
    # The resume graph starts under no_grad and enables grad where the block ends. It was handed to the backend
    # under no_grad (the mode at the break), so a backend deciding then compiled it for inference: the ops after
    # the block recorded no gradients (the result did not require grad). It is compiled in the mode it runs in.
    backend = CompileTimeGradModeBackend()
    compiled = capture.optimize(backend, dynamic=False)(_print_inside_no_grad)
    for seed in range(3):
        generator = torch.Generator().manual_seed(seed)
        x, w = torch.randn(4, generator=generator), torch.randn(4, generator=generator)
        ours, eager = w.clone().requires_grad_(), w.clone().requires_grad_()
        got, want = compiled(x, ours), _print_inside_no_grad(x, eager)
        torch.testing.assert_close(got, want)
        assert got.requires_grad and torch.is_grad_enabled()
        got.backward()
        want.backward()
        torch.testing.assert_close(ours.grad, eager.grad)
    assert backend.compiled_with_grad == [True, True]  # the first graph and the resume graph, each compiled once
