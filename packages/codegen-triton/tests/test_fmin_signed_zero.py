"""fmin/fmax keep eager's operand on a tie of -0.0 and +0.0 in Triton kernels, at static and symbolic sizes.

ATen's CPU fmin/fmax return the first operand on a tie for float16/float32/float64 and the second for
bfloat16; 1 / result shows the sign. A 0-d bool operand (False -> +0.0) is the fuzz finding 2e06a1094b.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

_VALUES = (-0.0, 0.0, float("nan"), 1.0, -2.0, float("-inf"))


def _ops(x: torch.Tensor, y: torch.Tensor, s: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (torch.fmin(x, y), torch.fmax(x, y), torch.fmin(y, x), torch.fmax(y, x), torch.fmin(x, s),
            torch.fmax(s, x), torch.fmin(x, b) ** -1, torch.fmax(b, x) ** -1)  # fmt: skip


def _inputs(n: int, dtype: torch.dtype) -> list[torch.Tensor]:
    k = len(_VALUES)
    idx = torch.arange(n)
    x = torch.tensor(_VALUES, dtype=torch.float64)[idx % k].to(dtype)
    y = torch.tensor(_VALUES, dtype=torch.float64)[(idx // k) % k].to(dtype)
    return [x, y, torch.tensor(-0.0, dtype=dtype), torch.tensor(False)]


def _assert_bitwise(got: Any, want: Any) -> None:
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and torch.equal(g.isnan(), w.isnan()), f"result {k}"
        numbers = ~w.isnan()
        assert torch.equal(g[numbers], w[numbers]), f"result {k}: {g} != {w}"
        assert torch.equal(g.signbit()[numbers], w.signbit()[numbers]), f"result {k}: {g} != {w}"


def _compile(backend: TritonBackend, fn: Callable[..., Any], inputs: list[torch.Tensor], symbolic: bool) -> Any:
    with torch.no_grad():
        gm = make_fx(fn, tracing_mode="symbolic" if symbolic else "real",
                     decomposition_table=inductor_ir.decompositions())(*inputs)  # fmt: skip
    example = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"] if symbolic else inputs
    return inductor_ir.compile_graph(gm, example, backends={"cpu": backend})


@pytest.mark.parametrize("dtype", (torch.float64, torch.float32, torch.bfloat16), ids=str)
def test_fmin_fmax_signed_zero_static(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    inputs = _inputs(40, dtype)
    compiled = _compile(cpu_backend, _ops, inputs, symbolic=False)
    _assert_bitwise(compiled(*inputs), _ops(*inputs))


def test_fmin_fmax_signed_zero_symbolic(cpu_backend: TritonBackend) -> None:
    compiled = _compile(cpu_backend, _ops, _inputs(64, torch.float64), symbolic=True)
    for n in (65, 37):
        inputs = _inputs(n, torch.float64)
        _assert_bitwise(compiled(*inputs), _ops(*inputs))
