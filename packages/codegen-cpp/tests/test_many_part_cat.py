"""A concatenation of a thousand parts compiles in seconds and matches eager (fuzz c4bb9ceda9: the
gradient of ``split(1)`` over 2,053 columns was one kernel of 2,053 masked loads, which kept the C++
compiler busy for minutes)."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def _cats_of_many_parts(x: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    split_gradient = torch.cat([*(torch.zeros(4, 1) for _ in range(x.size(1) - 1)), g], 1)
    reversed_columns = torch.cat(list(x.split(1, 1))[::-1], 1).sin()
    computed = torch.cat([x[:, i : i + 1] * (i % 5) for i in range(100)], 1)
    return split_gradient, reversed_columns, computed


def test_a_cat_of_a_thousand_parts_matches_eager(backend: CppBackend) -> None:
    x = torch.randn(4, 1000, generator=torch.Generator().manual_seed(9))
    g = torch.randn(4, 1, generator=torch.Generator().manual_seed(10))
    gm = make_fx(_cats_of_many_parts, decomposition_table=inductor_ir.decompositions())(x, g)
    compiled = inductor_ir.compile_graph(gm, [x, g], backends={"cpu": backend})
    for i, (got, want) in enumerate(zip(compiled(x, g), _cats_of_many_parts(x, g))):
        torch.testing.assert_close(got, want, msg=lambda m, i=i: f"output {i}: {m}")
    assert sum(len(s.source) for s in compiled.sources) < 100_000  # no kernel per part's mask
