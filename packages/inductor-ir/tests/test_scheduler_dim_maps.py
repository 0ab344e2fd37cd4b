"""Fusing nodes whose loops are ordered or split differently from the group's space (``DimMap``).

A batch-norm backward computes its per-channel sums over ``(C,) x (N, HW)`` while its pointwise terms
loop over ``(N, C, HW)``; a layer norm over a reshaped input reduces over ``(B, T) x (D,)`` while its
epilogue loops over ``(B*T, D)``. Both fuse into the reduction's kernel, and the results still match
eager.
"""

from __future__ import annotations

from typing import Any

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.scheduler.dim_maps import dim_maps
from inductor_ir.symbolic import index_symbol


def _compile(fn: Any, *inputs: torch.Tensor, fuse: bool = True) -> inductor_ir.CompiledGraph:
    gm = make_fx(fn)(*inputs)
    config = inductor_ir.InductorIRConfig(fuse=fuse, check_ir=True)
    return inductor_ir.compile_graph(gm, list(inputs), backends={"cpu": ReferenceBackend()}, config=config)


def batch_norm_backward(x: torch.Tensor, grad: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor) -> Any:
    """The ops autograd records for a decomposed training batch norm followed by ReLU (as in ResNet)."""
    m, r, w = mean[None, :, None], rstd[None, :, None], weight[None, :, None]
    xhat = (x - m) * r
    out = torch.relu(xhat * w)
    g = torch.where(out <= 0, torch.zeros((), dtype=x.dtype, device=x.device), grad)
    sum_g = g.sum((0, 2), keepdim=True)
    sum_gx = (g * xhat).sum((0, 2), keepdim=True)
    sum_gc = (g * w * (x - m)).sum((0, 2), keepdim=True)
    scaled = g * w * r  # used twice: a realized pointwise buffer
    sum_neg = (-scaled).sum((0, 2), keepdim=True)
    count = x.shape[0] * x.shape[2]
    dx = scaled + sum_neg / count + (sum_gc * -0.5 * r**3 * 2 / count) * (x - m)
    return dx, sum_g.flatten(), sum_gx.flatten()


def _bn_inputs() -> tuple[torch.Tensor, ...]:
    n, c, hw = 4, 6, 10
    return rand(n, c, hw), rand(n, c, hw), rand(c), rand(c).abs() + 0.5, rand(c)


def test_dim_maps_permute_and_split() -> None:
    # (N, C, HW) over (C,) x (N, HW): dim 0 -> group dim 1, dim 1 -> group dim 0, dim 2 -> group dim 2.
    maps = dim_maps((4, 6, 10), (6, 4, 10))
    assert maps and all(sorted(g for run in m for g, _ in run) == [0, 1, 2] for m in maps)
    assert ((1, 1),) == maps[0][0] and ((0, 1),) == maps[0][1]
    # (B*T, D) over (B, T, D): dim 0 spans group dims 0 and 1 with weights T and 1.
    assert dim_maps((24, 5), (2, 12, 5)) == [(((0, 12), (1, 1)), ((2, 1),))]
    assert dim_maps((24, 5), (2, 12, 5), monotone=True) == dim_maps((24, 5), (2, 12, 5))
    assert dim_maps((7, 5), (2, 12, 5)) == []  # different numel
    assert dim_maps((4, 6), (6, 4), monotone=True) == []  # a transpose is not order preserving


def test_batch_norm_backward_terms_fuse_into_the_channel_reductions() -> None:
    inputs = _bn_inputs()
    compiled = _compile(batch_norm_backward, *inputs)
    unfused = _compile(batch_norm_backward, *inputs, fuse=False)
    groups = compiled.schedule.kernel_groups
    # Every kernel loops over channels x (N, HW): the pointwise terms joined the reductions.
    assert all(g.reduction_size for g in groups), [(g.pointwise_size, g.reduction_size) for g in groups]
    assert len(groups) <= 2 < len(unfused.schedule.kernel_groups)
    fresh = _bn_inputs()
    assert_close(compiled(*fresh), batch_norm_backward(*fresh))


def layer_norm_of_reshaped(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Statistics over (B, T) x (D,), normalization over the (B*T, D) view (GPT-2's final layer norm)."""
    var, mean = torch.var_mean(x, -1, keepdim=True, correction=0)
    flat = (x - mean) * torch.rsqrt(var + 1e-5)
    return flat.reshape(-1, x.shape[-1]) * w + b


def test_layer_norm_epilogue_over_a_reshaped_view_fuses() -> None:
    def inputs() -> tuple[torch.Tensor, ...]:
        return rand(2, 12, 5), rand(5), rand(5)

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        # The affine step on the 2-D view is a pointwise node of (24, 5): it must land after the loop
        # of the (2, 12) x (5,) statistics, inside the same kernel.
        return layer_norm_of_reshaped(x, w, b).relu() + 1

    compiled = _compile(fn, *inputs())
    (group,) = compiled.schedule.kernel_groups
    assert group.reduction_size == (5,)
    fresh = inputs()
    assert_close(compiled(*fresh), fn(*fresh))


def test_pointwise_groups_fuse_across_a_reshape() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = (x.sin() * 2).reshape(6, 20)  # the view makes the consumer loop over (6, 20)
        return y.cos() + y

    x = rand(2, 3, 20)
    compiled = _compile(fn, x)
    assert len(compiled.schedule.kernel_groups) == 1
    fresh = rand(2, 3, 20)
    assert_close(compiled(fresh), fn(fresh))


def test_independent_tiny_kernels_fuse_side_by_side() -> None:
    def fn(*counters: torch.Tensor) -> Any:
        # Like every BatchNorm's `num_batches_tracked + 1`: nothing shared, one shape.
        return tuple(c + k for k, c in enumerate(counters))

    counters = [rand(3) for _ in range(5)]
    compiled = _compile(fn, *counters)
    assert len(compiled.schedule.kernel_groups) == 1
    fresh = [rand(3) for _ in range(5)]
    assert_close(compiled(*fresh), fn(*fresh))
    # Large independent kernels stay apart: fusing them would only lengthen one kernel.
    big = [rand(64, 64) for _ in range(2)]
    assert len(_compile(fn, *big).schedule.kernel_groups) == 2


def test_digits_of_a_reshaped_index_recombine() -> None:
    # A (B*T, D) loop reading a (B, T, D) buffer indexes it digit by digit; the digits recombine.
    x0, x1 = (index_symbol("x", k) for k in range(2))
    flat = 3072 * x0 + x1
    digits = 393216 * inductor_ir.FloorDiv(flat, 393216) + 3072 * inductor_ir.ModularIndexing(flat, 3072, 128)
    index = digits + inductor_ir.ModularIndexing(flat, 1, 3072)
    assert inductor_ir.simplify_index(index, [(x0, 256), (x1, 3072)]) == flat
    # Digits that do not tile (a transpose) stay as they are.
    swapped = 3072 * inductor_ir.FloorDiv(flat, 393216) + inductor_ir.ModularIndexing(flat, 3072, 128)
    assert inductor_ir.simplify_index(swapped, [(x0, 256), (x1, 3072)]).has(inductor_ir.FloorDiv)
