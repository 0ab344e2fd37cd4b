"""Channels-last feature maps: which graphs store their 4-D buffers channels-last, and what layout a
convolution's result then has.

In a graph of 2-D convolutions on CUDA or CPU (inference: no convolution input is also a graph output;
on CPU also training (`TRAINING_CHANNELS_LAST`): a forward whose convolution inputs are returned only as values saved for the
backward graph, which aotgrad then compiles for the layouts the forward returned, and that backward
graph; see :func:`wants_channels_last`), `lower` makes
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
from typing import Any

import sympy
import torch
import torch.fx

from inductor_ir.ir.layout import Layout
from inductor_ir.ir.nodes import Buffer, ExternKernel, ReinterpretView
from inductor_ir.lowering.registry import channels_last_strides

__all__ = ["arguments_moved", "convolution_result_layout", "fake_result_layouts", "wants_channels_last"]

_aten = torch.ops.aten

# Devices whose convolution libraries run channels-last feature maps faster (cuDNN, oneDNN).
_CHANNELS_LAST_DEVICES = frozenset({"cuda", "cpu"})

# Attention and batched matmuls, whose 4-D operands are not images (attention kernels need a
# contiguous last dim, as in ViT).
_NOT_CHANNELS_LAST = {
    _aten.bmm.default,
    _aten._scaled_dot_product_flash_attention.default,
    _aten._scaled_dot_product_efficient_attention.default,
    _aten._scaled_dot_product_cudnn_attention.default,
    _aten._scaled_dot_product_flash_attention_for_cpu.default,
}
_CONVOLUTIONS = (_aten.convolution.default, _aten.convolution_backward.default)

# Training channels-last on CPU: a forward returning its saved maps channels-last and a backward running
# convolution_backward channels-last. On an AVX-512 Xeon, one thread, resnet_tiny training went from 26.1
# to 23.3 ms per step and convnet_bn from 7.7 to 7.1 ms: oneDNN's NCHW convolution_backward copies its
# gradient and input to a contiguous layout, and the NCHW maps' allocations fault in fresh pages
# (2,500 page faults per step against 5). Its gradients agree with eager's as well as eager's own do
# with float64's, except where a pre-activation sits at float32's rounding of zero (resnet_tiny at one
# seed: 1.4e-7 before a ReLU; any other summation order, Kiln's or eager's own, may flip that mask).
# Tests set it to False to run the NCHW path.
TRAINING_CHANNELS_LAST = True


def wants_channels_last(
    graph: torch.fx.Graph, outputs: Collection[torch.fx.Node], saved: Collection[torch.fx.Node] = ()
) -> bool:
    """Whether to store the 4-D buffers of ``graph`` channels-last.

    Args:
        graph: the ATen graph about to be lowered.
        outputs: the nodes it returns where the caller sees them (their recorded layouts are kept).
        saved: the nodes it returns only as values saved for a backward graph that is compiled for
            the layouts this graph returns (a training forward's; see ``lower``'s
            ``free_layout_outputs``).

    Returns:
        True for a graph of 2-D convolutions, all on one device, without attention or ``bmm``: on
        CUDA an inference graph (no convolution input is returned; no ``convolution_backward``);
        on CPU also a training forward whose returned convolution inputs are all ``saved``, and a
        backward graph (its saved inputs arrive in the layouts the forward returned, its outputs
        keep their recorded layouts).
    """
    convs = [n for n in graph.nodes if n.op == "call_function" and n.target in _CONVOLUTIONS]
    if not convs or any(n.target in _NOT_CHANNELS_LAST for n in graph.nodes):
        return False
    devices = set()
    for node in convs:
        backward = node.target is _aten.convolution_backward.default
        image = node.args[1] if backward else node.args[0]
        val = image.meta.get("val") if isinstance(image, torch.fx.Node) else None
        if (
            not isinstance(val, torch.Tensor)
            or val.dim() != 4
            or val.device.type not in _CHANNELS_LAST_DEVICES
        ):
            return False
        devices.add(val.device.type)
        if node.args[6 + backward]:
            return False  # a transposed convolution
        if backward and not (TRAINING_CHANNELS_LAST and val.device.type == "cpu"):
            return False  # training channels-last is a CPU policy; a CUDA backward keeps its layouts
        if not backward and image in outputs:
            return False  # an input the caller sees, or saved for a backward compiled for its recorded layout
        if not backward and image in saved and not (TRAINING_CHANNELS_LAST and val.device.type == "cpu"):
            return False
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


def fake_result_layouts(op: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[Layout | None] | None:
    """The layouts ``op`` returns for arguments stored as the IR stores them (one per result, None
    for a result that is not a tensor), from a run on fake tensors with their sizes and strides;
    None when some tensor argument has symbolic sizes or strides.

    A channels-last graph's ``convolution_backward`` reads channels-last maps where FX recorded
    NCHW ones: ATen (oneDNN) then returns channels-last gradients, and recording them avoids a copy
    per result (``ensure_layout``) after every call.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    def static(values: Sequence[sympy.Expr]) -> list[int] | None:
        return [int(v) for v in values] if all(isinstance(v, sympy.Integer) for v in values) else None

    with FakeTensorMode() as mode:

        def fake(value: Any) -> Any:
            if isinstance(value, (Buffer, ReinterpretView)):
                layout = value.layout
                size, stride = static(layout.size), static(layout.stride)
                if size is None or stride is None:
                    raise _Symbolic
                return torch.empty_strided(size, stride, dtype=layout.dtype, device=layout.device)
            if isinstance(value, (list, tuple)):
                return type(value)(fake(v) for v in value)
            return value

        try:
            result = op(*fake(tuple(args)), **{k: fake(v) for k, v in kwargs.items()})
        except _Symbolic:
            return None
        except Exception:  # no fake kernel, or one that needs a real device: keep the recorded layouts
            return None
    del mode
    results = result if isinstance(result, (list, tuple)) else (result,)
    return [
        Layout(
            str(r.device), r.dtype, tuple(map(sympy.Integer, r.shape)), tuple(map(sympy.Integer, r.stride()))
        )
        if isinstance(r, torch.Tensor)
        else None
        for r in results
    ]


class _Symbolic(Exception):
    """A tensor argument with symbolic sizes or strides (no fake run)."""


def arguments_moved(recorded_args: Sequence[Any], args: Sequence[Any]) -> bool:
    """Whether some tensor argument in ``args`` (as the IR stores it) has other strides than FX
    recorded for it in ``recorded_args`` (the node's arguments, whose ``meta['val']`` holds them).

    An op run as itself returns results whose layouts follow its arguments' (attention gradients,
    ``empty_like``-style outputs); the layouts FX recorded then no longer hold.
    """

    def walk(recorded: Any, value: Any) -> bool:
        if isinstance(value, (list, tuple)) and isinstance(recorded, (list, tuple)):
            return any(walk(r, v) for r, v in zip(recorded, value))
        if not isinstance(value, (Buffer, ReinterpretView)) or not isinstance(recorded, torch.fx.Node):
            return False
        val = recorded.meta.get("val")
        if not isinstance(val, torch.Tensor):
            return False
        size, stride = tuple(val.shape), tuple(val.stride())
        if not all(type(n) is int for n in (*size, *stride)):
            return False  # symbolic: no fake run either (and comparing would add guards)
        layout = value.layout
        return size == tuple(layout.size) and not all(
            n == 1 or sympy.sympify(a) == b for n, a, b in zip(size, layout.stride, stride)
        )

    return walk(tuple(recorded_args), tuple(args))
