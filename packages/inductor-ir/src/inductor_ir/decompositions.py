"""`decompositions()`: the decomposition table a frontend passes to aotgrad for this backend.

It is torch's Core ATen decomposition table, plus decompositions of composite ops that this
package lowers better as reductions + pointwise (softmax, log_softmax, layer norm, ...), minus ops
we lower directly as a whole.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._decomp import core_aten_decompositions, get_decompositions

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
    aten.embedding_dense_backward,
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

# Lowered directly: keep them whole.
_KEEP = [aten.embedding.default, aten.index_select.default]


def decompositions() -> dict[Any, Any]:
    """Core ATen decompositions plus those that turn composite ops into reductions and pointwise ops."""
    table = dict(core_aten_decompositions())
    table.update(get_decompositions(_EXTRA))
    from inductor_ir.lowering import LOWERINGS

    # Ops we lower directly stay whole: our lowering is at least as good as a decomposition.
    for op in [*_KEEP, *LOWERINGS]:
        table.pop(op, None)
    return table
