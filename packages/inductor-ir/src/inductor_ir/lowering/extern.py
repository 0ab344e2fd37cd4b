"""Ops the wrapper calls through ATen as ``ExternKernel``s: matmuls and convolutions.

Their inputs are realized into buffers (strided views are passed as ``as_strided`` views) and
the output layout is the one FX recorded for the node.
"""

from __future__ import annotations

from typing import Any

import torch

from inductor_ir.ir.nodes import ExternKernel, IRNode, MultiOutput
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering

aten = torch.ops.aten

EXTERN_OPS = [
    aten.mm.default,
    aten.addmm.default,
    aten.bmm.default,
    aten.baddbmm.default,
    aten.convolution.default,
    aten.convolution_backward.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
]


def _realized(ctx: LoweringContext, value: Any) -> Any:
    if isinstance(value, IRNode):
        return ctx.realize(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_realized(ctx, v) for v in value)
    return value


@lowering(*EXTERN_OPS)
def extern(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Any:
    """An ``ExternKernel`` calling the op itself."""
    from inductor_ir.lower import layout_of

    val = ctx.meta()
    assert ctx.node is not None
    op = ctx.node.target
    args = _realized(ctx, args)
    kwargs = {k: _realized(ctx, v) for k, v in kwargs.items()}
    if isinstance(val, torch.Tensor):
        return ctx.register(ExternKernel(ctx.new_name(), layout_of(val), op, args, kwargs))
    if not isinstance(val, (list, tuple)):
        raise NotLowerable("extern op without recorded outputs")
    first = next((v for v in val if isinstance(v, torch.Tensor)), None)
    if first is None:
        raise NotLowerable("extern op without tensor outputs")
    kernel = ExternKernel(ctx.new_name(), layout_of(first), op, args, kwargs, output_is_tuple=True)
    ctx.register(kernel)
    outs: list[Any] = []
    for k, item in enumerate(val):
        if isinstance(item, torch.Tensor):
            outs.append(ctx.register(MultiOutput(ctx.new_name(), layout_of(item), kernel.name, (k,))))
        else:
            outs.append(None)
    return tuple(outs)
