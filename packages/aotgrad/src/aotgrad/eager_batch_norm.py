"""Batch norm's running mean as eager updates it: from the batch's sum / count.

torch's batch-norm decompositions take the batch mean from ``var_mean``, a Welford mean: with an
inf in a channel it is NaN (``inf + (x - inf) / n``), where eager's kernels divide the sum by the
count and get inf. Elsewhere the two agree to rounding. The wrapper here recomputes the new running
mean by eager's formula, ``momentum * mean + (1 - momentum) * running_mean``, and writes it (in
place, or as the functional op's ``running_mean_out``) over the decomposition's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["with_eager_running_mean"]


def _batch_mean(x: torch.Tensor) -> torch.Tensor:
    """Per-channel sum / count in the accumulation dtype (half inputs accumulate in float32)."""
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    dims = [0, *range(2, x.dim())]
    return x.detach().to(acc).sum(dims) / (x.numel() // x.shape[1])


def with_eager_running_mean(op: Any, decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """`decomposition` of the batch-norm overload `op`, its new running mean computed as eager's."""
    names = [a.name for a in op._schema.arguments]
    returns = [r.name for r in op._schema.returns]
    out_index = returns.index("running_mean_out") if "running_mean_out" in returns else None
    trains_always = "with_update" in op.name()

    def decompose(*args: Any, **kwargs: Any) -> Any:
        bound = dict(zip(names, args))
        bound.update(kwargs)
        running_mean = bound.get("running_mean")
        training = trains_always or bool(bound.get("training", False))
        momentum = bound.get("momentum", bound.get("exponential_average_factor"))
        if running_mean is None or not training or momentum is None:
            return decomposition(*args, **kwargs)
        old = running_mean if out_index is not None else running_mean.clone()  # in-place ops overwrite it
        result = decomposition(*args, **kwargs)
        new = (momentum * _batch_mean(bound["input"]) + (1 - momentum) * old).to(running_mean.dtype)
        if out_index is None:
            running_mean.copy_(new)
            return result
        return (*result[:out_index], new, *result[out_index + 1 :])

    return decompose
