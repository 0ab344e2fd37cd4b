"""Batch norm's running statistics as eager updates them: the mean from the batch's sum / count,
both outside autograd.

torch's batch-norm decompositions take the batch mean from ``var_mean``, a Welford mean: with an
inf in a channel it is NaN (``inf + (x - inf) / n``), where eager's kernels divide the sum by the
count and get inf. Elsewhere the two agree to rounding. The wrapper here recomputes the new running
mean by eager's formula, ``momentum * mean + (1 - momentum) * running_mean``, and writes it (in
place, or as the functional op's ``running_mean_out``) over the decomposition's. Eager's kernels
update the statistics without recording them for autograd; the decomposition computes the new
running variance from the differentiable batch variance, so the wrapper detaches it: a program that
reads the running variance back (``instance_norm`` copies it into its caller's buffer) would
otherwise get a buffer that requires grad, and gradients through it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["mixed_type_in_float32", "native_batch_norm_for_replay", "with_eager_running_stats"]


def mixed_type_in_float32(decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """`decomposition` of a batch-norm overload (input first, then weight, bias, running mean and
    variance), run on the input in float32 where ATen takes its mixed-type path: a float16/bfloat16
    input with a float32 one among those four. Eager then computes in float32 and returns the saved
    mean and invstd in float32; torch's decompositions round them to the input's dtype, and the
    backward read the rounded ones (bfloat16 activations with float32 BatchNorm parameters: the
    weight's gradient 0.5% off eager's). Only the output is rounded to the input's dtype."""

    def decompose(x: Any, *args: Any, **kwargs: Any) -> Any:
        parameters = [*args[:4], *(kwargs.get(n) for n in ("weight", "bias", "running_mean", "running_var"))]
        half = isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16)
        if not half or not any(isinstance(p, torch.Tensor) and p.dtype == torch.float32 for p in parameters):
            return decomposition(x, *args, **kwargs)
        result = decomposition(x.to(torch.float32), *args, **kwargs)
        if result is NotImplemented:
            return result
        first = result[0].to(x.dtype)
        return (first, *result[1:]) if isinstance(result, tuple) else [first, *result[1:]]

    return decompose


def _batch_mean(x: torch.Tensor) -> torch.Tensor:
    """Per-channel sum / count in the accumulation dtype (half inputs accumulate in float32)."""
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    dims = [0, *range(2, x.dim())]
    return x.detach().to(acc).sum(dims) / (x.numel() // x.shape[1])


_STATS = ("running_mean", "running_var")


def _with_arguments(args: tuple[Any, ...], kwargs: dict[str, Any], names: list[str], values: dict[str, Any]) -> list[Any]:
    """`args` with the positional ones named in `values` replaced."""
    replaced = list(args)
    for name, value in values.items():
        if name not in kwargs:
            replaced[names.index(name)] = value
    return replaced


def _with_keywords(kwargs: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """`kwargs` with those named in `values` replaced."""
    return {name: values.get(name, value) for name, value in kwargs.items()}


def with_eager_running_stats(op: Any, decomposition: Callable[..., Any]) -> Callable[..., Any]:
    """`decomposition` of the batch-norm overload `op`, its new running mean computed as eager's and
    both new running statistics outside autograd."""
    names = [a.name for a in op._schema.arguments]
    returns = [r.name for r in op._schema.returns]
    out_index = returns.index("running_mean_out") if "running_mean_out" in returns else None
    var_index = returns.index("running_var_out") if "running_var_out" in returns else None
    trains_always = "with_update" in op.name()

    def decompose(*args: Any, **kwargs: Any) -> Any:
        bound = dict(zip(names, args))
        bound.update(kwargs)
        training = trains_always or bool(bound.get("training", False))
        result = _with_eager_update(bound, training, args, kwargs)
        aliased = [p for p in ("weight", "bias") for s in _STATS if bound.get(p) is not None and bound.get(p) is bound.get(s)]
        if training and aliased:
            result, bound = _with_updated_affine(bound, args, kwargs, result, aliased)
        return _with_cpu_output(bound, training, result)

    def _with_updated_affine(
        bound: dict[str, Any], args: Any, kwargs: Any, result: Any, aliased: list[str]
    ) -> tuple[Any, dict[str, Any]]:
        """Eager updates the running statistics before it applies the weight and bias: where one is
        the very tensor of a running statistic (`batch_norm(x, m, v, v, b)`), the output takes its
        new value. The statistics stay those of the first run. Returns the result and the arguments
        the output was computed from."""
        if out_index is None:  # in place: the buffers (so the weight or bias) hold the new values now
            scratch = {name: bound[name].clone() for name in _STATS if bound.get(name) is not None}
            output = decomposition(*_with_arguments(args, kwargs, names, scratch), **_with_keywords(kwargs, scratch))
        else:
            new = {"running_mean": result[out_index], "running_var": result[var_index] if var_index is not None else None}
            values = {p: new[s] for p in aliased for s in _STATS if bound[p] is bound.get(s) and new[s] is not None}
            output = decomposition(*_with_arguments(args, kwargs, names, values), **_with_keywords(kwargs, values))
            bound = {**bound, **values}
        first = (output[0], *result[1:])
        return (first if isinstance(result, tuple) else list(first)), bound

    def _with_eager_update(bound: dict[str, Any], training: bool, args: Any, kwargs: Any) -> Any:
        running_mean = bound.get("running_mean")
        momentum = bound.get("momentum", bound.get("exponential_average_factor"))
        if running_mean is None or not training or momentum is None:
            return decomposition(*args, **kwargs)
        new = (momentum * _batch_mean(bound["input"]) + (1 - momentum) * running_mean).to(running_mean.dtype)
        if out_index is None:
            # The in-place overloads: the decomposition updates scratch copies (its writes carry the
            # batch's gradient), and the buffers get one detached write each.
            scratch = {name: bound[name].clone() for name in _STATS if bound.get(name) is not None}
            result = decomposition(*_with_arguments(args, kwargs, names, scratch), **_with_keywords(kwargs, scratch))
            running_mean.copy_(new)
            if "running_var" in scratch:
                bound["running_var"].copy_(scratch["running_var"].detach())
            return result
        result = [*decomposition(*args, **kwargs)]
        result[out_index] = new
        if var_index is not None and result[var_index] is not None:
            result[var_index] = result[var_index].detach()
        return tuple(result)

    return decompose


def _with_cpu_output(bound: dict[str, Any], training: bool, result: Any) -> Any:
    """`result` with its output recomputed as eager's CPU kernel computes it, per channel
    ``alpha = invstd * weight``, ``beta = bias - mean * alpha``, then ``x * alpha + beta`` (the
    decomposition's ``(x - mean) * invstd * weight + bias`` gives inf where that gives NaN, with an
    infinite weight). The statistics are the batch's (the decomposition's saved mean and inverse
    standard deviation) in training, the running ones in evaluation. Inputs that are not contiguous and
    other devices: unchanged."""
    x = bound.get("input")
    if not isinstance(x, torch.Tensor) or x.device.type != "cpu" or not isinstance(result, (tuple, list)) or x.dim() < 2:
        return result
    if not x.is_contiguous():
        return result  # eager's strided path computes ``(x - mean) * invstd * weight + bias``, as the decomposition
    acc = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    if training:
        mean, invstd = result[1], result[2]
    else:
        running_mean, running_var = bound.get("running_mean"), bound.get("running_var")
        if running_mean is None or running_var is None:
            return result
        # In float32 for half-precision statistics, as eager's kernel: rounded to bfloat16, an inverse
        # standard deviation moved an output near 0 across it.
        mean, invstd = running_mean, 1 / torch.sqrt(running_var.to(acc) + bound.get("eps", 1e-5))
    if not isinstance(mean, torch.Tensor) or not isinstance(invstd, torch.Tensor) or mean.numel() != x.shape[1]:
        return result
    alpha = invstd.to(acc).reshape(-1)
    weight, bias = bound.get("weight"), bound.get("bias")
    if weight is not None:
        alpha = alpha * weight.to(acc)
    beta = -(mean.to(acc).reshape(-1) * alpha)
    if bias is not None:
        beta = bias.to(acc) + beta
    shape = [1, x.shape[1]] + [1] * (x.dim() - 2)
    out = (x.to(acc) * alpha.reshape(shape) + beta.reshape(shape)).to(result[0].dtype)
    return (out, *result[1:]) if isinstance(result, tuple) else [out, *result[1:]]


def native_batch_norm_for_replay(
    x: torch.Tensor,
    weight: torch.Tensor | None,
    bias: torch.Tensor | None,
    running_mean: torch.Tensor | None,
    running_var: torch.Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
) -> Any:
    """``native_batch_norm`` as the functional op eager differentiates the same way, for a double
    backward's replay graph (`runtime/higher_order.py`): its update of the running statistics, which
    its schema does not declare, becomes explicit copies that functionalization sees, and the op
    itself stays whole, so the replay differentiates it with eager's own derivative formula. Without
    running statistics to update: the op as it is.

    The op is given copies of the running statistics: its autograd node saves them (its backward
    takes them, unused in training), and a replay graph that keeps its in-place ops
    (`trace_with_writes`) runs the copies into them for real, after which that node's backward would
    raise "modified by an inplace operation" (instance norm's repeated statistics, fuzz 3577c8a563)."""
    if not training or running_mean is None or running_var is None:
        return NotImplemented
    aten = torch.ops.aten
    out, mean, invstd, new_mean, new_var = aten._native_batch_norm_legit_functional.default(
        x, weight, bias, running_mean.clone(), running_var.clone(), True, momentum, eps
    )
    running_mean.copy_(new_mean)
    running_var.copy_(new_var)
    return out, mean, invstd
