"""Big graphs compile correctly and in proportion to their size (behaviour, not timing).

A 12-layer transformer-like stack is the shape of BERT-base; its layers must compile to the same
kernels layer after layer (so a code generator can share them), and match eager.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir

_LAYERS = 12
_WIDTH = 16


def _layer(x: torch.Tensor, w_qkv: torch.Tensor, w_out: torch.Tensor, w_ff: torch.Tensor) -> torch.Tensor:
    q, k, v = (x @ w_qkv).split(_WIDTH, -1)
    attention = torch.softmax(q @ k.transpose(-1, -2) / 4.0, -1) @ v
    x = F.layer_norm(x + attention @ w_out, (_WIDTH,))
    return F.layer_norm(x + F.gelu(x @ w_ff), (_WIDTH,))


def _stack(x: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
    for k in range(_LAYERS):
        x = _layer(x, *weights[3 * k : 3 * k + 3])
    return x


def _inputs() -> list[torch.Tensor]:
    weights: list[torch.Tensor] = []
    for _ in range(_LAYERS):
        weights += [rand(_WIDTH, 3 * _WIDTH) * 0.3, rand(_WIDTH, _WIDTH) * 0.3, rand(_WIDTH, _WIDTH) * 0.3]
    return [rand(2, 8, _WIDTH), *weights]


def test_twelve_layer_stack_matches_eager_with_the_same_kernels_per_layer() -> None:
    example = _inputs()
    gm = make_fx(_stack)(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": ReferenceBackend()})
    fresh = _inputs()
    assert_close(compiled(*fresh), (_stack(*fresh),))
    groups = compiled.schedule.kernel_groups
    assert len(groups) % _LAYERS == 0, [g.name for g in groups]
    per_layer = len(groups) // _LAYERS
    # Every layer's kernels have the same shapes and origins as the first layer's (names differ by counter).
    def shape_of(group: Any) -> tuple[Any, ...]:
        origins = tuple(o for node in group.nodes for o in node.origins)
        return group.pointwise_size, group.reduction_size, origins, len(group.inputs), len(group.outputs)

    first = [shape_of(g) for g in groups[:per_layer]]
    for layer in range(1, _LAYERS):
        assert [shape_of(g) for g in groups[layer * per_layer : (layer + 1) * per_layer]] == first


def test_kernel_names_come_from_every_fused_op() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.cos(x) + torch.sin(y)

    example = [rand(100), rand(100)]
    compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": ReferenceBackend()})
    (group,) = compiled.schedule.kernel_groups
    assert group.name.startswith("fused_") and all(op in group.name for op in ("cos", "sin", "add"))
    fresh = [rand(100), rand(100)]
    assert_close(compiled(*fresh), (fn(*fresh),))


def _conv_net(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = F.relu(F.conv2d(x, w1, padding=1) * 2 + 1)
    z = F.conv2d(y, w2, padding=1)
    return F.relu(z + y).mean((2, 3)) + bias, z


def test_cuda_conv_graph_stores_feature_maps_channels_last() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        shapes = [(2, 8, 10, 10), (8, 8, 3, 3), (8, 8, 3, 3), (8,)]
        example = [torch.empty(*shape, device="cuda") for shape in shapes]
        gm = make_fx(_conv_net)(*example)
        program = inductor_ir.lower(gm, example, layout_optimization=True)
        plain = inductor_ir.lower(gm, example, layout_optimization=False)
    convs = [b for b in program.buffers if isinstance(b, inductor_ir.ExternKernel)]
    # The NCHW graph input is copied channels-last for the first conv; every feature map is channels-last.
    assert [tuple(int(s) for s in c.layout.stride) for c in convs] == [(800, 1, 80, 8), (800, 1, 80, 8)]
    assert isinstance(convs[0].args[0], inductor_ir.ComputedBuffer)
    assert all(tuple(int(s) for s in c.args[0].layout.stride) == (800, 1, 80, 8) for c in convs)
    # Outputs keep the layouts FX recorded (the second output, z, is copied back to NCHW).
    for out in program.outputs:
        assert tuple(int(s) for s in out.layout.stride) in ((8, 1), (800, 100, 10, 1))
    assert all(
        tuple(int(s) for s in b.layout.stride) != (800, 1, 80, 8) for b in plain.buffers if len(b.layout.size) == 4
    )


def _patch_attention(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    tokens = F.conv2d(x, w, stride=4).flatten(2).transpose(1, 2)  # (N, 4, 8) patches
    heads = tokens.view(2, 4, 2, 4).transpose(1, 2) * 2  # a 4-D value realized for the attention call
    return torch.ops.aten._scaled_dot_product_efficient_attention.default(heads, heads, heads, None, False)[0]


def test_attention_graphs_keep_contiguous_layouts() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        example = [torch.empty(2, 3, 8, 8, device="cuda"), torch.empty(8, 3, 4, 4, device="cuda")]
        gm = make_fx(_patch_attention)(*example)
        program = inductor_ir.lower(gm, example, layout_optimization=True)
    # Attention needs a contiguous last dim: no buffer of this graph is stored channels-last.
    for buf in program.buffers:
        if len(buf.layout.size) == 4:
            assert buf.layout.stride[-1] == 1 or buf.layout.size[-1] == 1, (buf.name, buf.layout)
