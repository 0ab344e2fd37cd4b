"""Torch functions whose kernels check or branch on data, traced as the tensor code they compute.

`torch.cov`, `torch.corrcoef`, `torch.quantile` and `torch.nanquantile` are composites whose C++
bodies ask a tensor's value (`is_scalar_tensor_true`: cov's degrees-of-freedom check, quantile's
`q` range check), which fake tensors cannot answer: recorded as one call, they broke the graph.
Where that question has an answer before the call runs (no weights for cov, whose degrees of freedom
are ``n - correction``; a number `q` for quantile, checked here), capture inlines the functions
below instead: the same ops in the same order as the kernels, so the values (NaN handling, rounding
of the ranks in the input's dtype, the interpolation modes) are eager's. Other calls are recorded
as before.

`data_checked_call(tx, fn, args, kwargs)` returns the traced result, or None for "record it as usual".
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch

from capture.variables.base import ConstantVariable, VariableTracker
from capture.variables.functions import UserFunctionVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _cov(input: torch.Tensor, correction: int) -> torch.Tensor:
    """`torch.cov` without weights (aten/src/ATen/native/Correlation.cpp, step by step)."""
    x = input.view(1, -1) if input.dim() < 2 else input
    n = x.size(1)
    avg = x.sum(1) / n
    norm_factor = n - correction
    if norm_factor <= 0:  # eager warns and divides by zero
        norm_factor = 0
    centred = x - avg.unsqueeze(1)
    c = torch.mm(centred, centred.t().conj())
    return torch.true_divide(c, norm_factor).squeeze()


def _corrcoef(input: torch.Tensor) -> torch.Tensor:
    """`torch.corrcoef` of a real tensor: the covariance (`_cov`'s steps with correction 1, written
    out: capture does not trace into a second function of this module) scaled by the standard
    deviations, clipped."""
    x = input.view(1, -1) if input.dim() < 2 else input
    n = x.size(1)
    centred = x - (x.sum(1) / n).unsqueeze(1)
    c = torch.true_divide(torch.mm(centred, centred.t().conj()), max(n - 1, 0)).squeeze()
    if c.dim() == 0:
        return c / c
    stddev = torch.sqrt(c.diagonal())
    c = c / stddev.view(-1, 1)
    c = c / stddev.view(1, -1)
    return c.clip(-1, 1)


def _quantile(input: torch.Tensor, q: float, dim: int | None, out_shape: tuple[int, ...], interpolation: str,
              ignore_nan: bool) -> torch.Tensor:
    """`torch.quantile` / `torch.nanquantile` for a number `q` (aten/src/ATen/native/Sorting.cpp's
    quantile_compute): sort each reduced row, turn `q` into a rank in the input's dtype, gather and
    interpolate."""
    if dim is None:
        rows = input.reshape(1, -1)
    else:
        moved = input.unsqueeze(-1).transpose(dim, -1)
        rows = moved.reshape(-1, moved.size(-1))
    ordered = torch.sort(rows, -1).values
    q_value = torch.full((), q, dtype=input.dtype, device=input.device)
    if ignore_nan:
        ranks = q_value * (ordered.isnan().logical_not().sum(-1, keepdim=True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        last_index = ordered.size(-1) - 1
        has_nan = ordered.isnan().any(-1, keepdim=True)
        ranks = (q_value * last_index).expand(has_nan.shape).masked_fill(has_nan, last_index)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    ranks_below = ranks.long()
    values = ordered.gather(-1, ranks_below)
    if interpolation in ("linear", "midpoint"):
        weights = torch.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - ranks_below
        values_above = ordered.gather(-1, ranks.ceil().long())
        values = values.lerp(values_above, weights)
    return values.reshape(out_shape)


def _cov_signature(input: Any, *, correction: Any = 1, fweights: Any = None, aweights: Any = None) -> None: ...
def _corrcoef_signature(input: Any) -> None: ...
def _quantile_signature(input: Any, q: Any, dim: Any = None, keepdim: Any = False, *,
                        interpolation: Any = "linear", out: Any = None) -> None: ...


def _constant(value: Any) -> Any:
    """The Python value of an argument that is a constant (or a default), else a marker no check accepts."""
    if isinstance(value, VariableTracker):
        return value.as_constant() if value.is_constant() else _NOT_CONSTANT
    return value


_NOT_CONSTANT = object()


def _static_float_tensor(value: Any) -> torch.Tensor | None:
    """The fake example of a real floating tensor argument with static sizes, else None."""
    example = getattr(value, "example", None)
    if not isinstance(example, torch.Tensor) or example.dtype not in _FLOATS:
        return None
    if any(not isinstance(size, int) for size in example.shape):
        return None
    return example


def _bind(signature: Callable[..., None], args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> dict[str, Any] | None:
    try:
        bound = inspect.signature(signature).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


def _cov_call(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> tuple[Callable[..., Any], list[Any]] | None:
    bound = _bind(_cov_signature, args, kwargs)
    if bound is None or _constant(bound["fweights"]) is not None or _constant(bound["aweights"]) is not None:
        return None
    example, correction = _static_float_tensor(bound["input"]), _constant(bound["correction"])
    if example is None or example.dim() > 2 or type(correction) is not int:
        return None
    return _cov, [bound["input"], correction]


def _corrcoef_call(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> tuple[Callable[..., Any], list[Any]] | None:
    bound = _bind(_corrcoef_signature, args, kwargs)
    if bound is None:
        return None
    example = _static_float_tensor(bound["input"])
    if example is None or example.dim() > 2:
        return None
    return _corrcoef, [bound["input"]]


def _quantile_call(ignore_nan: bool) -> Callable[..., tuple[Callable[..., Any], list[Any]] | None]:
    def call(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> tuple[Callable[..., Any], list[Any]] | None:
        bound = _bind(_quantile_signature, args, kwargs)
        if bound is None or _constant(bound["out"]) is not None:
            return None
        example = _static_float_tensor(bound["input"])
        q, dim, keepdim, interpolation = (_constant(bound[name]) for name in ("q", "dim", "keepdim", "interpolation"))
        if example is None or example.dtype not in (torch.float32, torch.float64) or example.numel() == 0:
            return None
        if type(q) not in (float, int) or not 0 <= q <= 1 or interpolation not in _INTERPOLATIONS:
            return None  # eager's own argument errors come from the recorded call
        if (dim is not None and type(dim) is not int) or type(keepdim) is not bool:
            return None
        meta = torch.empty(example.shape, dtype=example.dtype, device="meta")
        try:  # the output's shape, from eager's own rules (on meta tensors the data check is skipped)
            shape = tuple(torch.quantile(meta, float(q), dim, keepdim, interpolation=interpolation).shape)
        except Exception:
            return None
        wrapped = None if dim is None else dim % max(example.dim(), 1)
        return _quantile, [bound["input"], float(q), wrapped, shape, interpolation, ignore_nan]

    return call


_CALLS: dict[Any, Callable[..., tuple[Callable[..., Any], list[Any]] | None]] = {
    torch.cov: _cov_call,
    torch.corrcoef: _corrcoef_call,
    torch.quantile: _quantile_call(ignore_nan=False),
    torch.nanquantile: _quantile_call(ignore_nan=True),
}


def data_checked_call(tx: Tracer, fn: Any, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """`fn(*args, **kwargs)` traced through its tensor code where `fn` is one of the functions above
    and its data check has an answer now; None where the call is recorded as usual."""
    plan = _CALLS.get(fn)
    if plan is None:
        return None
    chosen = plan(args, kwargs)
    if chosen is None:
        return None
    implementation, arguments = chosen
    wrapped = [a if isinstance(a, VariableTracker) else ConstantVariable(a) for a in arguments]
    # The implementations are this module's own Python functions (typed as callables by mypy).
    return UserFunctionVariable(cast(types.FunctionType, implementation)).call(tx, wrapped, {})
