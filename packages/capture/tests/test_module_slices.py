"""Slices of ModuleList/Sequential (`self.layers[: n]`) are new objects on every call: guards must sit on
the parent container and the constant slice, never on the slice's identity (no recompile per call)."""

from __future__ import annotations

import torch
from capture_helpers import RecordingBackend

import capture


class Decoder(torch.nn.Module):
    """The LLaMA-style loop: `for layer in self.layers[: self.num_layers]`."""

    def __init__(self, layers: int = 4) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(layers))
        self.num_layers = layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers[: self.num_layers]:
            x = torch.tanh(layer(x))
        return x


class SequentialHead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seq = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8), torch.nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        head = self.seq[1:]
        return head(x) + head[0](x) + self.seq[::2][1](x)


def test_slice_of_module_list_compiles_once() -> None:
    torch.manual_seed(0)
    model, backend = Decoder(), RecordingBackend()
    compiled = capture.optimize(backend)(model)
    for _ in range(4):
        x = torch.randn(3, 8)
        torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 1


def test_slice_guards_follow_the_parent() -> None:
    torch.manual_seed(0)
    model, backend = Decoder(), RecordingBackend()
    compiled = capture.optimize(backend)(model)
    x = torch.randn(3, 8)
    compiled(x)
    model.num_layers = 2  # a different slice: recompiles, and runs two layers
    torch.testing.assert_close(compiled(x), model(x))
    model.layers.append(torch.nn.Linear(8, 8))
    model.num_layers = 5  # a longer parent: recompiles, and runs the new layer
    torch.testing.assert_close(compiled(x), model(x))
    model.layers[0] = torch.nn.Linear(8, 8)  # a replaced layer: recompiles
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 4
    torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 4


def test_slice_of_sequential_called_and_indexed() -> None:
    torch.manual_seed(0)
    model, backend = SequentialHead(), RecordingBackend()
    compiled = capture.optimize(backend)(model)
    for _ in range(3):
        x = torch.randn(3, 8)
        torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 1
