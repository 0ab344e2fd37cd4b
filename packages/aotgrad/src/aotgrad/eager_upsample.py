"""Linear, bilinear and trilinear upsampling as eager's CPU kernels compute them (inductor_ir has the
same decomposition for tables used without aotgrad; neither package may import the other, so the two
are kept in step by hand).

torch's decomposition blends two neighbours as ``v1 + (v2 - v1) * alpha``; eager's kernels weigh
them, ``v1 * (1 - alpha) + v2 * alpha``. The two agree on finite values (up to rounding) but not at
infinities: where both neighbours are the same infinite pixel (the clamped last one) eager gives
inf and the difference form gives ``inf - inf = nan``. `upsample_linear` is torch's decomposition
(indices, weights, opmath dtype, memory format) with eager's weighted sum.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import product
from typing import Any

import torch
from torch._decomp.decompositions import _compute_scale, _compute_source_index, upsample_compute_output_size
from torch._decomp.decompositions import _upsample_linear as torch_upsample_linear
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes, suggest_memory_format
from torch.overrides import TorchFunctionMode

aten = torch.ops.aten

__all__ = ["EAGER_UPSAMPLE", "UpsampleAsEager", "upsample_linear"]


def upsample_linear(
    x: torch.Tensor, output_size: Sequence[int], align_corners: bool, scales: Sequence[float | None]
) -> torch.Tensor:
    """`x` (batch, channels, spatial...) resized to `output_size`: every output the weighted sum of
    its two neighbours along each spatial dimension, innermost first, as eager computes it."""
    if not x.is_floating_point():
        # Integer images have no infinities; torch's decomposition rounds them as eager does.
        return torch_upsample_linear(x, list(output_size), align_corners, list(scales))  # type: ignore[no-any-return]
    _, dtype = elementwise_dtypes(x, type_promotion_kind=ELEMENTWISE_TYPE_PROMOTION_KIND.INT_TO_FLOAT)
    compute = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype  # eager's opmath
    n_dims = x.dim() - 2
    lows: list[torch.Tensor] = []
    highs: list[torch.Tensor] = []
    alphas: list[torch.Tensor] = []
    for k, (in_size, out_size, scale) in enumerate(zip(x.shape[2:], output_size, scales, strict=True)):
        factor = _compute_scale(in_size, out_size, align_corners, scale)
        i = torch.arange(out_size, device=x.device).to(dtype=compute)
        source = _compute_source_index(factor, i, align_corners).clamp(min=0.0)
        source = source.reshape(source.shape[0], *[1] * (n_dims - 1 - k))
        low = source.to(torch.int64)
        lows.append(low)
        # A dim that keeps its size reads one pixel (eager's kernels take both neighbours from the
        # output index there): its right neighbour, weighted 0, would turn an inf into nan.
        highs.append(low if in_size == out_size else (low + 1).clamp(max=in_size - 1))
        alphas.append((source - low).clamp(0.0, 1.0))
    values: list[torch.Tensor] = []
    for corner in product(*[[0, 1]] * n_dims):
        index = [None, None] + [lows[k] if corner[k] == 0 else highs[k] for k in range(n_dims)]
        values.append(aten._unsafe_index(x, index).to(compute))
    for k in reversed(range(n_dims)):
        values = [v1 * (1 - alphas[k]) + v2 * alphas[k] for v1, v2 in zip(values[::2], values[1::2], strict=True)]
    return values[0].contiguous(memory_format=suggest_memory_format(x)).to(x.dtype)


def _default(n_dims: int) -> Callable[..., torch.Tensor]:
    def decompose(x: torch.Tensor, output_size: Sequence[int], align_corners: bool, *scales: float | None) -> torch.Tensor:
        return upsample_linear(x, output_size, align_corners, [*scales, *[None] * (n_dims - len(scales))])

    return decompose


def _vec(
    x: torch.Tensor, output_size: Sequence[int] | None, align_corners: bool, scale_factors: Sequence[float] | None
) -> torch.Tensor:
    size = upsample_compute_output_size(x.size(), output_size, scale_factors)
    return upsample_linear(x, size, align_corners, list(scale_factors) if scale_factors else [None] * len(size))


EAGER_UPSAMPLE: dict[Any, Callable[..., Any]] = {
    aten.upsample_linear1d.default: _default(1),
    aten.upsample_bilinear2d.default: _default(2),
    aten.upsample_trilinear3d.default: _default(3),
    aten.upsample_linear1d.vec: _vec,
    aten.upsample_bilinear2d.vec: _vec,
    aten.upsample_trilinear3d.vec: _vec,
}


_NN_UPSAMPLE = {
    torch._C._nn.upsample_linear1d: aten.upsample_linear1d.vec,
    torch._C._nn.upsample_bilinear2d: aten.upsample_bilinear2d.vec,
    torch._C._nn.upsample_trilinear3d: aten.upsample_trilinear3d.vec,
}


class UpsampleAsEager(TorchFunctionMode):
    """Routes `F.interpolate`'s linear modes to the weighted sums above at the torch-function level.

    Under the Python dispatcher (tracing at symbolic sizes) the `.vec` overloads run torch's own
    Python decomposition, the difference form, before any decomposition table is consulted: an
    infinite edge pixel then came out nan where eager gives inf (fuzz d8f15e6cd8).
    """

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        if func is torch.nn.functional.interpolate:  # reached first (it dispatches to modes itself)
            routed = _linear_interpolation(*args, **(kwargs or {}))
            if routed is not None:
                return routed
        overload = _NN_UPSAMPLE.get(func)
        if overload is not None and len(args) >= 3 and not (kwargs or {}):
            x, output_size, align_corners = args[0], args[1], args[2]
            scale_factors = args[3] if len(args) > 3 else None
            if isinstance(x, torch.Tensor) and isinstance(align_corners, bool):
                return EAGER_UPSAMPLE[overload](x, output_size, align_corners, scale_factors)
        return func(*args, **(kwargs or {}))


_LINEAR_MODES = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _linear_interpolation(
    x: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> torch.Tensor | None:
    """`F.interpolate` of a linear mode as eager computes it, or None for what it does not cover."""
    dims = _LINEAR_MODES.get(mode)
    if dims is None or antialias or not isinstance(x, torch.Tensor) or x.dim() != dims + 2:
        return None
    if (size is None) == (scale_factor is None):
        return None
    if size is not None:
        sizes = list(size) if isinstance(size, (list, tuple)) else [size] * dims
        return upsample_linear(x, sizes, bool(align_corners), [None] * dims)
    scales = [float(f) for f in scale_factor] if isinstance(scale_factor, (list, tuple)) else [float(scale_factor)] * dims
    if recompute_scale_factor:
        # F.interpolate's sizes, size * factor truncated, and scales derived from them, not the factors
        # (at symbolic sizes this path once fell through to torch's difference form: nan at an
        # infinite pixel where eager gives inf, fuzz 12226dc8c7).
        sizes = [torch.sym_int(torch.sym_float(x.shape[2 + k]) * scales[k]) for k in range(dims)]
        return upsample_linear(x, sizes, bool(align_corners), [None] * dims)
    return _vec(x, None, bool(align_corners), scales)
