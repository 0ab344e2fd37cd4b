"""Ops the wrapper calls through ATen as ``ExternKernel``s: matmuls, convolutions, attention, embedding gradients.

Their inputs are realized into buffers (strided views are passed as ``as_strided`` views) and
the output layout is the one FX recorded for the node. A matmul operand that is a transpose of a
value not yet in memory (a backward graph's ``permute(gelu_backward(...))``) is computed in its own
row-major order and passed as a transposed view: ATen's matmuls take either order without a copy,
and the kernel computing it keeps unit-stride (vectorized) stores.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch

from inductor_ir.ir.layout import Layout
from inductor_ir.ir.nodes import (
    Buffer,
    ExternKernel,
    IndexView,
    IRNode,
    MultiOutput,
    Pointwise,
    ReinterpretView,
)
from inductor_ir.layout_policy import fake_result_layouts
from inductor_ir.lowering.common import stretches
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, channels_last_strides, lowering
from inductor_ir.lowering.views import is_dense
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import index_symbol

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
    # The gradient of an embedding is a scatter-add of rows into a zeroed table. ATen's kernel does it
    # in one pass over the indices; the decomposition (zeros + index_put with accumulate) would reach
    # us as a dense comparison of every table row with every index, or as two ATen calls (2-3x
    # slower on CPU at GPT-2/BERT sizes).
    aten.embedding_dense_backward.default,
]


# Attention kernels return their output in their query's memory order (a query stored batch, sequence,
# heads gives an output stored that way), and their backward kernels each gradient in its input's; the
# output layouts FX recorded hold for the inputs' recorded strides only. Their inputs not yet in
# memory are stored in those strides (`store_in_recorded_layouts`): the extern ops here, the others
# (cuDNN's attention, every backward) where they run as FallbackKernels.
ATTENTION_OPS = frozenset([
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
])
ATTENTION_FALLBACK_OPS = frozenset(
    getattr(aten, name).default
    for name in (
        "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_cudnn_attention_backward",
        "_scaled_dot_product_flash_attention_backward",
        "_scaled_dot_product_efficient_attention_backward",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
    )
    if hasattr(aten, name)
)


# Matmuls whose operands may be a transposed view (the last two dims swapped) of a buffer.
TRANSPOSABLE_OPS = frozenset([aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default])


def _transposed_operand(ctx: LoweringContext, value: IRNode) -> ReinterpretView | None:
    """``value`` as a transposed view of its realized base when it swaps the base's last two dims."""
    if not isinstance(value, IndexView):
        return None
    size = value.get_size()
    ndim = len(size)
    if ndim not in (2, 3) or len(value.data.get_size()) != ndim:
        return None
    index = [index_symbol("i", k) for k in range(ndim)]
    swapped = [*index[:-2], index[-1], index[-2]]
    if list(value.reindex(index)) != swapped:
        return None
    base = ctx.realize(value.data)
    if isinstance(base, ReinterpretView):
        buffer, layout = base.data, base.layout
    elif isinstance(base, Buffer):
        buffer, layout = base, base.layout
    else:
        return None
    if getattr(buffer, "output_is_tuple", False) or tuple(layout.size) != (*size[:-2], size[-1], size[-2]):
        return None
    stride = (*layout.stride[:-2], layout.stride[-1], layout.stride[-2])
    return ReinterpretView(buffer, Layout(layout.device, layout.dtype, tuple(size), stride, layout.offset))


def _realized(ctx: LoweringContext, value: Any, transposable: bool) -> Any:
    if isinstance(value, IRNode):
        view = _transposed_operand(ctx, value) if transposable else None
        return ctx.realize(value) if view is None else view
    if isinstance(value, (list, tuple)):
        return type(value)(_realized(ctx, v, transposable) for v in value)
    return value


def store_in_recorded_layouts(ctx: LoweringContext, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """An attention op's tensor arguments not yet in memory, stored with the strides FX recorded for them.

    The kernel computing a query (rotary embedding, a concatenation) may store it in any order; stored
    in eager's order (a transposed view's), the attention output comes back in the layout FX recorded,
    instead of being copied into it on every call.
    """
    from inductor_ir.lower import layout_of

    assert ctx.node is not None
    stored: list[Any] = []
    for value, source in zip(args, ctx.node.args):
        recorded = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if isinstance(value, IRNode) and not isinstance(value, (Buffer, ReinterpretView)) and isinstance(recorded, torch.Tensor):
            layout = layout_of(recorded)
            static = all(isinstance(v, sympy.Integer) for v in (*layout.size, *layout.stride))
            # Attention kernels read rows with a unit stride (or copy them into such rows first).
            unit_rows = static and bool(layout.size) and (layout.stride[-1] == 1 or layout.size[-1] == 1)
            if unit_rows and is_dense(tuple(map(int, layout.size)), tuple(map(int, layout.stride))):
                value = ctx.realize(value, layout.stride)
        stored.append(value)
    return (*stored, *args[len(stored):])


def _channels_last_input(ctx: LoweringContext, image: Any) -> Any:
    """A convolution's input stored channels-last (a copy) when layout optimization is on and it is not.

    Only a graph's input images arrive in another layout (every computed 4-D buffer is channels-last
    then); cuDNN returns a result in its input's layout, so without the copy the first convolution's
    result and the kernels reading it (batch norm, max pooling) would walk memory across the layout.
    """
    if not isinstance(image, Buffer) or len(image.layout.size) != 4:
        return image
    size = tuple(image.layout.size)
    target = channels_last_strides(size)
    if all(n == 1 or a == b for n, a, b in zip(size, image.layout.stride, target)):
        return image
    copy = Pointwise(image.make_loader(), size, image.layout.dtype, image.device, ("convolution",))
    return ctx.realize(copy, target)


def _on_cuda(value: Any) -> bool:
    return isinstance(value, Buffer) and str(value.device).startswith("cuda")


@lowering(*EXTERN_OPS)
def extern(ctx: LoweringContext, *args: Any, **kwargs: Any) -> Any:
    """An ``ExternKernel`` calling the op itself."""
    from inductor_ir.lower import layout_of

    val = ctx.meta()
    assert ctx.node is not None
    op = ctx.node.target
    transposable = op in TRANSPOSABLE_OPS
    if op in ATTENTION_OPS:
        args = store_in_recorded_layouts(ctx, args)
    args = _realized(ctx, args, transposable)
    if op is aten.convolution.default and ctx.channels_last and args:
        args = (_channels_last_input(ctx, args[0]), *args[1:])
        if len(args) > 1 and _on_cuda(args[1]):
            # cuDNN copies a weight whose layout differs from the input's on every call (ATen's
            # `contiguous`: an allocation and a copy launched from C++, ~30 us of host time each);
            # copied in the graph instead, it is one generated kernel (ResNet-50's 17 non-1x1 weights).
            args = (args[0], _channels_last_input(ctx, args[1]), *args[2:])
    if op is aten.convolution_backward.default and ctx.channels_last and len(args) > 1:
        # A saved input image (or a tangent) in NCHW beside channels-last gradients: oneDNN would
        # convert the larger gradient map to NCHW on every call (8x32x32x32: 0.8 ms, and a slower
        # weight gradient); copying the image is cheaper.
        args = (_channels_last_input(ctx, args[0]), _channels_last_input(ctx, args[1]), *args[2:])
    kwargs = {k: _realized(ctx, v, transposable) for k, v in kwargs.items()}
    if isinstance(val, torch.Tensor):
        return ctx.register(ExternKernel(ctx.new_name(), layout_of(val), op, args, kwargs))
    if not isinstance(val, (list, tuple)):
        raise NotLowerable("extern op without recorded outputs")
    first = next((v for v in val if isinstance(v, torch.Tensor)), None)
    if first is None:
        raise NotLowerable("extern op without tensor outputs")
    layouts: list[Layout | None] = [layout_of(v) if isinstance(v, torch.Tensor) else None for v in val]
    if op is aten.convolution_backward.default and ctx.channels_last:
        # Channels-last maps where FX recorded NCHW ones: the gradients come back channels-last.
        layouts = fake_result_layouts(op, args, kwargs) or layouts
    kernel = ExternKernel(ctx.new_name(), layout_of(first), op, args, kwargs, output_is_tuple=True)
    ctx.register(kernel)
    outs: list[Any] = []
    for k, item in enumerate(val):
        layout = layouts[k]
        if isinstance(item, torch.Tensor) and layout is not None:
            outs.append(ctx.register(MultiOutput(ctx.new_name(), layout, kernel.name, (k,))))
        else:
            outs.append(None)
    return tuple(outs)


@lowering(aten.addmm.default)
def addmm(ctx: LoweringContext, bias: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """``bias + mat1 @ mat2``: on CUDA in float32, an ``mm`` call and a bias add fused into the consumers.

    cuBLAS picks slower kernels for float32 GEMMs with a bias epilogue than without (H200, M=6304:
    K=3072, N=768 0.76 vs 0.64 ms; M=512: 0.099 vs 0.066 ms), while the add costs nothing once fused
    into the pointwise or reduction kernel that follows (a residual add, a layer norm): so when some user
    computes on the result, the GEMM runs without the bias. Half-precision
    GEMMs run as fast with the bias as without, and the CPU's BLAS adds it in place: both stay one
    ``addmm`` call.
    """
    val = ctx.meta()
    plain = beta == 1 and alpha == 1 and isinstance(bias, IRNode) and len(bias.get_size()) == 1
    if not (plain and isinstance(val, torch.Tensor) and val.device.type == "cuda" and val.dtype == torch.float32):
        return extern(ctx, bias, mat1, mat2, beta=beta, alpha=alpha)
    # Only where some user computes on the result (a graph output or another matmul would store the
    # add in a kernel of its own: one more launch).
    assert ctx.node is not None
    if not any(user.op == "call_function" and user.target not in EXTERN_OPS for user in ctx.node.users):
        return extern(ctx, bias, mat1, mat2, beta=beta, alpha=alpha)
    from inductor_ir.lower import layout_of

    mat1, mat2 = _realized(ctx, (mat1, mat2), True)
    product = ctx.register(ExternKernel(ctx.new_name(), layout_of(val), aten.mm.default, (mat1, mat2), {}))
    load_product, load_bias = product.make_loader(), bias.make_loader()
    # A bias of one element broadcasts over the columns (linear(x, w, torch.randn(1))).
    columns = product.get_size()[-1]
    one = bias.get_size()[0] != columns and stretches(bias.get_size()[0], ctx.program.hint)
    return Pointwise(
        lambda index: ops.add(load_product(index), load_bias([sympy.Integer(0) if one else index[-1]])),
        tuple(product.get_size()),
        val.dtype,
        product.device,
        ("addmm",),
    )
