"""`super()` in methods of nn.Module subclasses, zero-argument and explicit, keeps one graph.

On Python 3.12 zero-argument ``super().forward(x)`` is one instruction (LOAD_SUPER_ATTR) whose
class comes from the ``__class__`` cell; a module class in that cell was not recognised as a class
and every such forward (transformers' scaled embeddings, convnext's layer norm) broke the graph.
"""

from __future__ import annotations

import torch

import capture


class ScaledEmbedding(torch.nn.Embedding):
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return super().forward(ids) * 2.0


class ExplicitSuperNorm(torch.nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.transpose(0, 1)).transpose(0, 1)


class Plain:
    def scale(self, x: torch.Tensor) -> torch.Tensor:
        return x * 3


class Child(Plain):
    def scale(self, x: torch.Tensor) -> torch.Tensor:
        return super().scale(x) + 1


def _compile(fn):  # type: ignore[no-untyped-def]
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        graphs.append(gm)
        return gm.forward

    return capture.optimize(backend)(fn), graphs


def test_zero_argument_super_in_a_module_forward() -> None:
    module = ScaledEmbedding(10, 4)
    ids = torch.randint(0, 10, (2, 3), generator=torch.Generator().manual_seed(0))
    compiled, graphs = _compile(module)
    torch.testing.assert_close(compiled(ids), module(ids))
    assert len(graphs) == 1


def test_explicit_super_in_a_module_forward() -> None:
    module = ExplicitSuperNorm(5)
    x = torch.randn(5, 3, 5, generator=torch.Generator().manual_seed(1))
    compiled, graphs = _compile(module)
    torch.testing.assert_close(compiled(x), module(x))
    assert len(graphs) == 1


def test_zero_argument_super_of_a_plain_class() -> None:
    child = Child()
    x = torch.randn(4, generator=torch.Generator().manual_seed(2))
    compiled, graphs = _compile(lambda x: child.scale(x).sin())
    torch.testing.assert_close(compiled(x), child.scale(x).sin())
    assert len(graphs) == 1
