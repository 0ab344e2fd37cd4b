"""A `functools.partial` made before the call (`partial(F.gelu, approximate="tanh")` kept on a module, as
transformers' activations do) is traced through, with its function, arguments and keywords guarded."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from capture_helpers import RecordingBackend

import capture


class Activation(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = functools.partial(F.gelu, approximate="tanh")
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.lin(x))


SCALED_ADD = functools.partial(torch.add, alpha=3.0)


def uses_global_partial(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return SCALED_ADD(x, y).relu()


def test_partial_on_a_module_is_one_graph() -> None:
    torch.manual_seed(0)
    model, backend = Activation(), RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(model)
    for _ in range(3):
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 1


def test_partial_keywords_and_function_are_guarded() -> None:
    torch.manual_seed(0)
    model, backend = Activation(), RecordingBackend()
    compiled = capture.optimize(backend)(model)
    x = torch.randn(4, 6)
    compiled(x)
    model.act.keywords["approximate"] = "none"  # same partial object, other keyword value
    torch.testing.assert_close(compiled(x), model(x))
    model.act = functools.partial(F.silu)  # another function
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 3


def test_global_partial_with_a_tensor_call() -> None:
    torch.manual_seed(0)
    backend = RecordingBackend()
    compiled = capture.optimize(backend, nopython=True)(uses_global_partial)
    x, y = torch.randn(5), torch.randn(5)
    torch.testing.assert_close(compiled(x, y), uses_global_partial(x, y))
    assert backend.count == 1
