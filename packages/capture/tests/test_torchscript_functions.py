"""TorchScript functions called in captured code (older transformers' DeBERTa scripts its helpers).

A ScriptFunction cannot be a graph node (FX writes a call of its class: "ScriptFunction: No
constructor defined!" at run time); capture traces the Python function it was scripted from.
"""

from __future__ import annotations

import torch

import capture


@torch.jit.script
def expand_positions(positions: torch.Tensor, query: torch.Tensor, relative: torch.Tensor) -> torch.Tensor:
    return positions.expand([query.size(0), query.size(1), query.size(2), relative.size(-1)])


@torch.jit.script
def scaled_size_sqrt(query: torch.Tensor, scale_factor: int) -> torch.Tensor:
    return torch.sqrt(torch.tensor(query.size(-1), dtype=torch.float) * scale_factor)


class Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query = torch.nn.Linear(4, 4)
        self.expand = expand_positions

    def forward(self, x: torch.Tensor, relative: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = self.query(x)
        positions = torch.arange(relative.size(-1)).view(1, 1, 1, -1)
        expanded = self.expand(positions, q.unsqueeze(-1), relative)
        return q / scaled_size_sqrt(q, 2), expanded.sum(-1)


def test_scripted_functions_are_traced_through() -> None:
    torch.manual_seed(0)
    module = Attention()
    x = torch.randn(2, 3, 4)
    relative = torch.zeros(1, 5, 5, dtype=torch.long)
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):  # type: ignore[no-untyped-def]
        graphs.append(gm)
        return gm.forward

    compiled = capture.optimize(backend)(module)
    for actual, expected in zip(compiled(x, relative), module(x, relative)):
        torch.testing.assert_close(actual, expected)
    assert len(graphs) == 1
    assert not any(isinstance(n.target, torch.jit.ScriptFunction) for n in graphs[0].graph.nodes)
