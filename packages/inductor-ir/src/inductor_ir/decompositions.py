"""`decompositions()`: the decomposition table a frontend passes to aotgrad for this backend.

It is torch's Core ATen decomposition table, plus decompositions of composite ops that this
package lowers better as reductions + pointwise (softmax, log_softmax, layer norm, ...), minus ops
we lower directly as a whole. Layer norm and group norm use our own decompositions, whose
statistics are one ``var_mean`` (one Welford reduction).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

from inductor_ir.eager_upsample import EAGER_UPSAMPLE

__all__ = ["decompositions"]

aten = torch.ops.aten

_EXTRA = [
    aten._softmax,
    aten._log_softmax,
    aten._softmax_backward_data,
    aten._log_softmax_backward_data,
    aten.native_layer_norm,
    aten.native_layer_norm_backward,
    aten.native_batch_norm,
    aten.native_group_norm,
    aten.var_mean,
    aten.var,
    aten.std,
    aten.mean,
    aten.gelu,
    aten.gelu_backward,
    aten.silu,
    aten.silu_backward,
    aten.hardtanh,
    aten.leaky_relu,
    aten.elu,
    aten.threshold_backward,
    aten.addcmul,
    aten.addcdiv,
    aten.lerp,
    aten.logsumexp,
    aten.nll_loss_forward,
    aten.nll_loss_backward,
    aten.masked_fill,
    aten.fill,
    aten.zero,
    aten.ones_like,
    aten.zeros_like,
    aten.full_like,
    aten.new_zeros,
    aten.new_ones,
    aten.new_full,
    aten.new_empty,
    aten.expand_as,
    aten.tril,
    aten.triu,
]

# Lowered directly: keep them whole. (So is every op in LOWERINGS, e.g. the extern calls, among
# them `embedding_dense_backward`: see lowering/extern.py.)
_KEEP = [aten.embedding.default, aten.index_select.default]

# Run as ATen's kernel: linspace from 0-d tensor ends. torch's decomposition of them computes in
# float64 (eager's kernel: in the dtype, one fused multiply-add an element); the lowering of
# `aten.linspace.default` (lowering/linspace.py) takes number ends only.
_EAGER_KERNELS = [aten.linspace.Tensor_Tensor, aten.linspace.Tensor_Scalar, aten.linspace.Scalar_Tensor]


def _statistics(x: torch.Tensor, dims: list[int], eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x in its computation dtype, mean, rstd) over ``dims`` with kept dims: one ``var_mean``.

    ``var_mean`` lowers to a single Welford reduction, where torch's reference decompositions
    reach us as separate ``var`` and ``sum`` reductions.
    """
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    x = x.to(compute)
    var, mean = aten.var_mean.correction(x, dims, correction=0, keepdim=True)
    return x, mean, aten.rsqrt.default(var + eps)


def _mixed_type(x: torch.Tensor, *parameters: torch.Tensor | None) -> bool:
    """Whether ATen's norm kernels take their mixed-type path: a float16/bfloat16 input with a float32
    weight or bias (a half-precision model with float32 norms, or a norm under autocast). They then
    compute in float32 and return the mean and rstd in float32, where the input's dtype would round
    them, and the backward would read the rounded ones (fuzz 2532db79f3: under bfloat16 autocast a
    group norm's rstd 6.985 became 7.0 and the bias gradient through it -0.0046 where eager's is 1e-7)."""
    return x.dtype in (torch.float16, torch.bfloat16) and any(
        p is not None and p.dtype == torch.float32 for p in parameters
    )


def native_layer_norm(
    x: torch.Tensor, normalized_shape: list[int], weight: torch.Tensor | None, bias: torch.Tensor | None, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``aten.native_layer_norm`` as var_mean + pointwise; (out, mean, rstd) as ATen returns them."""
    axis = x.dim() - len(normalized_shape)
    x_acc, mean, rstd = _statistics(x, list(range(axis, x.dim())), eps)
    out = (x_acc - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    if x.device.type == "cpu" and not _mixed_type(x, weight, bias):
        mean, rstd = mean.to(x.dtype), rstd.to(x.dtype)  # ATen's CPU kernel returns them in the input dtype
    return out.to(x.dtype), mean, rstd


def native_group_norm(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
    batch: int, channels: int, inner: int, groups: int, eps: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # fmt: skip
    """``aten.native_group_norm`` as var_mean over each group + pointwise; mean/rstd are (N, groups).

    The output is ATen's algebra (CPU and CUDA alike): per (sample, channel) ``scale = rstd * weight``
    and ``shift = bias - scale * mean``, then ``x * scale + shift``. ``(x - mean) * rstd * weight``
    gives other values where they are not finite (an infinite weight: eager NaN, that form inf).
    """
    grouped = x.reshape(batch, groups, channels // groups * inner)
    x_acc, mean, rstd = _statistics(grouped, [2], eps)

    def per_channel(statistic: torch.Tensor) -> torch.Tensor:  # (N, G, 1) -> (N, C, 1)
        return statistic.expand(batch, groups, channels // groups).reshape(batch, channels, 1)

    scale = per_channel(rstd)
    if weight is not None:
        scale = scale * weight.reshape(1, channels, 1)
    shift = -scale * per_channel(mean)
    if bias is not None:
        shift = shift + bias.reshape(1, channels, 1)
    out = (x_acc.reshape(batch, channels, inner) * scale + shift).reshape(x.shape)
    statistics = mean.dtype if _mixed_type(x, weight, bias) else x.dtype
    return out.to(x.dtype), mean.reshape(batch, groups).to(statistics), rstd.reshape(batch, groups).to(statistics)


def eye(
    n: int, m: int | None = None, *, dtype: torch.dtype | None = None, layout: torch.layout | None = None,
    device: torch.device | None = None, pin_memory: bool | None = None,
) -> torch.Tensor:  # fmt: skip
    """``aten.eye`` from int64 ranges: torch's picks the narrowest dtype holding the size, uint16 from
    256 rows or columns on, which CPU ``arange`` and our code generators do not support."""
    del layout, pin_memory
    rows = torch.arange(n, dtype=torch.int64, device=device)
    cols = torch.arange(n if m is None else m, dtype=torch.int64, device=device)
    return (rows.unsqueeze(-1) == cols).to(dtype or torch.get_default_dtype())


def xlogy(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``x * log(y)`` (0 where x is 0, NaN where y is): in float32, but for float16/bfloat16 with the
    logarithm rounded to that dtype first, as eager's half kernels compute it (a float32 log gives
    -4.0 where eager gives -3.984375)."""
    dtype = torch.result_type(x, y)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    x, y = x.to(dtype).to(compute), y.to(dtype).to(compute)  # a float32 0-d y is rounded to half first
    log = aten.log.default(y)
    if compute != dtype:
        log = log.to(dtype).to(compute)
    out = torch.where(x == 0, torch.zeros((), dtype=compute, device=x.device), x * log)
    return torch.where(y.isnan(), torch.full((), float("nan"), dtype=compute, device=x.device), out).to(dtype)


def _xlogy_number_dtype(tensor: torch.Tensor, number: float) -> torch.dtype:
    """The dtype eager gives the number of ``xlogy(tensor, number)`` (or its mirror): the result's
    floating dtype, so a half tensor rounds it (1e5 becomes inf) and an integer tensor never wraps it
    (``xlogy(int8, 300)`` is ``x * log(300.0)``, not ``x * log(44)``)."""
    dtype = torch.result_type(tensor, number)
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def xlogy_scalar_other(x: torch.Tensor, y: float) -> torch.Tensor:
    """``xlogy(tensor, number)``."""
    return xlogy(x, torch.scalar_tensor(y, dtype=_xlogy_number_dtype(x, y), device=x.device))


def xlogy_scalar_self(x: float, y: torch.Tensor) -> torch.Tensor:
    """``xlogy(number, tensor)``."""
    return xlogy(torch.scalar_tensor(x, dtype=_xlogy_number_dtype(y, x), device=y.device), y)


# Ours replace torch's for these (layer and group norm: their statistics become one Welford reduction).
_OWN = {
    aten.native_layer_norm.default: native_layer_norm,
    aten.native_group_norm.default: native_group_norm,
    aten.eye.default: eye,
    aten.eye.m: eye,
    aten.xlogy.Tensor: xlogy,
    aten.xlogy.Scalar_Other: xlogy_scalar_other,
    aten.xlogy.Scalar_Self: xlogy_scalar_self,
}


def decompositions() -> dict[Any, Any]:
    """Core ATen decompositions plus those that turn composite ops into reductions and pointwise ops.

    A fresh dict each call (callers may change it); the table is built once per process (building it
    took 50-120 ms, once per compiled graph).
    """
    return dict(_table())


@functools.cache
def _table() -> dict[Any, Any]:
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    from inductor_ir.lowering import LOWERINGS

    # Ops we lower directly stay whole: our lowering is at least as good as a decomposition.
    for op in [*_KEEP, *_EAGER_KERNELS, *LOWERINGS]:
        table.pop(op, None)
    table.update(_OWN)
    # Where torch decomposes linear upsampling, weigh the neighbours as eager does (inf stays inf).
    table.update({op: fn for op, fn in EAGER_UPSAMPLE.items() if op in table})
    return table
