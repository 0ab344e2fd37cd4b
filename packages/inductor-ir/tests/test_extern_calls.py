"""Extern calls in the wrapper: matmuls through their public functions, attention inputs stored as eager stores them.

A structured matmul (mm, addmm, bmm, baddbmm) always returns a new row-major tensor, so the wrapper calls
it without a layout check; an attention kernel returns its output in its query's memory order, so a
query computed by a kernel is stored in the order FX recorded for it and the output needs no copy.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.ir.nodes import ExternKernel

aten = torch.ops.aten


def _matmuls(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t = (a * 2).t()  # a transposed operand
    return (
        t @ b,
        torch.addmm(bias, a, b.t(), beta=0.5, alpha=2.0),
        torch.bmm(x, x.transpose(1, 2)),
        torch.baddbmm(x.sin(), x, x.transpose(1, 2)),
    )


def test_matmuls_are_called_through_public_functions_without_a_layout_check() -> None:
    torch.manual_seed(0)
    inputs = [rand(6, 6), rand(6, 6), rand(6), rand(3, 6, 6)]
    compiled = inductor_ir.compile_graph(make_fx(_matmuls)(*inputs), inputs, backends={"cpu": ReferenceBackend()})
    source = inductor_ir.wrapper_source(compiled.schedule)
    for name in ("torch.mm(", "torch.addmm(", "torch.bmm(", "torch.baddbmm("):
        assert name in source, source
    assert "ensure_layout(" not in source and "_op_aten_mm" not in source
    for _ in range(2):
        inputs = [rand(6, 6), rand(6, 6), rand(6), rand(3, 6, 6)]
        assert_close(compiled(*inputs), _matmuls(*inputs))


def _conv_attention(x: torch.Tensor, w: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return F.conv2d(x, w, padding=1).relu(), F.scaled_dot_product_attention(q, q, q, scale=0.5)


def test_convolution_and_attention_are_called_through_public_functions() -> None:
    torch.manual_seed(0)
    inputs = [rand(2, 3, 8, 8), rand(4, 3, 3, 3), rand(2, 2, 5, 8)]
    compiled = inductor_ir.compile_graph(make_fx(_conv_attention)(*inputs), inputs, backends={"cpu": ReferenceBackend()})
    source = inductor_ir.wrapper_source(compiled.schedule)
    assert "torch.convolution(" in source and "torch._scaled_dot_product_flash_attention_for_cpu(" in source, source
    assert "_op_aten_convolution" not in source
    for _ in range(2):
        inputs = [rand(2, 3, 8, 8), rand(4, 3, 3, 3), rand(2, 2, 5, 8)]
        assert_close(compiled(*inputs), _conv_attention(*inputs))


def _attention(x: torch.Tensor, w: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    # LLaMA's shape of computation: a projection viewed as (batch, heads, tokens, dim) through a transpose,
    # then a pointwise rotary step, whose result the attention reads.
    batch, tokens, _ = x.shape
    q = (x @ w).view(batch, tokens, 2, 8).transpose(1, 2)
    q = q * cos + q.flip(-1) * (1 - cos)
    return F.scaled_dot_product_attention(q, q, q, is_causal=True)


def test_a_computed_query_is_stored_in_eagers_order_so_attention_needs_no_copy() -> None:
    torch.manual_seed(0)
    inputs = [rand(2, 5, 16), rand(16, 16), rand(5, 8)]
    gm = make_fx(_attention)(*inputs)
    attention = next(n for n in gm.graph.nodes if n.target is aten._scaled_dot_product_flash_attention_for_cpu.default)
    recorded_query = tuple(attention.args[0].meta["val"].stride())
    recorded_output = tuple(next(iter(attention.users)).meta["val"].stride())
    assert recorded_query != (80, 40, 8, 1)  # the transposed view's strides, not row-major
    program = inductor_ir.lower(gm, inputs)
    kernel = next(b for b in program.buffers if isinstance(b, ExternKernel) and b.op is attention.target)
    query = kernel.args[0]
    assert tuple(int(s) for s in query.layout.stride) == recorded_query
    compiled = inductor_ir.compile_graph(gm, inputs, backends={"cpu": ReferenceBackend()})
    result = compiled(*inputs)
    assert result.stride() == recorded_output
    copies = []
    original = torch.Tensor.copy_
    try:
        torch.Tensor.copy_ = lambda self, *a, **k: copies.append(self.shape) or original(self, *a, **k)  # type: ignore[method-assign]
        inputs = [rand(2, 5, 16), rand(16, 16), rand(5, 8)]
        result = compiled(*inputs)
    finally:
        torch.Tensor.copy_ = original  # type: ignore[method-assign]
    assert not copies, copies  # the attention output came back in the recorded layout
    assert_close(result, _attention(*inputs))
