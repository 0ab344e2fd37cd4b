"""Order comparisons of bools (``a < b``, ``a >= False``): vector code holds bools as 0/-1 lane masks, where
true sorts below false, so the generated comparisons must still give eager's answers in the vector loop,
its scalar tail and against splatted constants."""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def _comparisons(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (a < b, a > b, a <= b, a >= b, a == b, a != b, a < True, a >= False, a > False, True > a)


@pytest.mark.parametrize("size", [5, 18, 33])
def test_bool_comparisons_match_eager(backend: CppBackend, size: int) -> None:
    generator = torch.Generator().manual_seed(size)
    a = torch.rand(size, generator=generator) > 0.5
    b = torch.rand(size, generator=generator) > 0.5
    gm = make_fx(_comparisons, decomposition_table=inductor_ir.decompositions())(a, b)
    compiled = inductor_ir.compile_graph(gm, [a, b], backends={"cpu": backend})
    for got, expected in zip(compiled(a, b), _comparisons(a, b), strict=True):
        torch.testing.assert_close(got, expected)
