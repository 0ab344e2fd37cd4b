"""Channels-last feature maps: which graphs store their 4-D buffers channels-last, and what layout a
convolution's result then has.

In a graph of 2-D convolutions on CUDA or CPU (inference: no convolution input is also a graph output, as
a training forward's are, saved for a backward graph traced for the recorded layouts), `lower` makes
every realized 4-D buffer channels-last (``LoweringContext.channels_last``), the convolution lowering
copies an input image channels-last (``lowering/extern.py``), and a convolution reading a
channels-last input records the channels-last result cuDNN (or oneDNN) returns (:func:`convolution_result_layout`). cuDNN then runs
its NHWC kernels without converting layouts around each call; on CPU oneDNN's NHWC convolutions are
faster than its NCHW ones (2-core AMD EPYC, one thread, 8x32x32x32 -> 32 channels, 3x3: 4.5 -> 1.9 ms;
the 3-channel stem 1.6 -> 0.27 ms). Graph outputs keep the layouts FX recorded.
``InductorIRConfig.layout_optimization`` turns it off.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import sympy
import torch
import torch.fx

from inductor_ir.ir.layout import Layout
from inductor_ir.ir.nodes import Buffer, ExternKernel
from inductor_ir.lowering.registry import channels_last_strides

__all__ = ["convolution_result_layout", "wants_channels_last"]

_aten = torch.ops.aten

# Devices whose convolution libraries run channels-last feature maps faster (cuDNN, oneDNN).
_CHANNELS_LAST_DEVICES = frozenset({"cuda", "cpu"})

# A backward graph (traced for the recorded layouts), or attention and batched matmuls whose 4-D
# operands are not images (attention kernels need a contiguous last dim, as in ViT).
_NOT_CHANNELS_LAST = {
    _aten.convolution_backward.default,
    _aten.bmm.default,
    _aten._scaled_dot_product_flash_attention.default,
    _aten._scaled_dot_product_efficient_attention.default,
    _aten._scaled_dot_product_cudnn_attention.default,
    _aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def wants_channels_last(graph: torch.fx.Graph, outputs: Collection[torch.fx.Node]) -> bool:
    """Whether to store the 4-D buffers of ``graph`` channels-last.

    Args:
        graph: the ATen graph about to be lowered.
        outputs: the nodes it returns.

    Returns:
        True for a graph of 2-D convolutions on CUDA or CPU, all on one device (forward only, no attention or ``bmm``) whose
        convolution inputs are not graph outputs (a training forward saves them for the backward
        graph, which was traced for the recorded layouts).
    """
    convs = [n for n in graph.nodes if n.op == "call_function" and n.target is _aten.convolution.default]
    if not convs or any(n.target in _NOT_CHANNELS_LAST for n in graph.nodes):
        return False
    devices = set()
    for node in convs:
        val = node.meta.get("val")
        if (
            not isinstance(val, torch.Tensor)
            or val.dim() != 4
            or val.device.type not in _CHANNELS_LAST_DEVICES
        ):
            return False
        devices.add(val.device.type)
        source = node.args[0]
        if (len(node.args) > 6 and node.args[6]) or (isinstance(source, torch.fx.Node) and source in outputs):
            return False  # transposed convolution, or an input saved for the backward graph
    return len(devices) == 1


def convolution_result_layout(kernel: ExternKernel) -> Layout:
    """The layout of a convolution's result in a channels-last graph: cuDNN returns a channels-last
    result for a channels-last input; otherwise the layout ``kernel`` recorded."""
    source = kernel.args[0] if kernel.args else None
    layout = kernel.layout
    if not isinstance(source, Buffer) or len(layout.size) != 4:
        return layout
    if _same_strides(source.layout, channels_last_strides(source.layout.size)):
        return Layout(layout.device, layout.dtype, layout.size, channels_last_strides(layout.size))
    return layout


def _same_strides(layout: Layout, stride: Sequence[sympy.Expr]) -> bool:
    return all(n == 1 or a == b for n, a, b in zip(layout.size, layout.stride, stride))
