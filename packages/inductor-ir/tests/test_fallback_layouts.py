"""An op run as itself (a FallbackKernel) gets arguments stored in the IR's layouts, which may differ
from the ones FX recorded; its results' layouts then come from a fake run on those arguments, so the
wrapper does not copy every result into the recorded layout after each call (``ensure_layout``).

Found on the H200: cuDNN attention's query was stored heads-major where eager's was sequence-major, and
the output and the query gradient of each layer of a LLaMA-style model were copied on every step.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
import inductor_ir.wrapper


def _graph(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # Eager's `y` is column-major (it follows the transposed input); the IR stores it row-major.
    y = x.transpose(0, 1) * 2 + 1
    mantissa, exponent = torch.frexp(y)  # no lowerings: both run as themselves
    return torch.special.bessel_j0(y) * 3, mantissa + 1, exponent * 2


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Any]]:
    seen: list[tuple[Any, Any]] = []
    original = inductor_ir.wrapper.ensure_layout

    def counting(result: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
        out = original(result, size, stride)
        if out is not result:
            seen.append((result.stride(), stride))
        return out

    monkeypatch.setattr(inductor_ir.wrapper, "ensure_layout", counting)
    return seen


def test_fallback_results_take_the_layouts_their_stored_arguments_give(copies: list[tuple[Any, Any]]) -> None:
    torch.manual_seed(0)
    example = [torch.randn(6, 4)]
    compiled = inductor_ir.compile_graph(make_fx(_graph)(*example), example, backends={"cpu": ReferenceBackend()})
    x = torch.randn(6, 4)
    got = compiled.call([x])
    assert_close(list(got), list(_graph(x)))
    assert copies == [], f"results copied into the recorded layouts: {copies}"
