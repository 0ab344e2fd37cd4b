"""Activation gradients at NaN, infinities and region boundaries match eager's.

torch's decompositions of ``hardtanh_backward`` (relu6), ``elu_backward`` (selu, celu),
``hardswish_backward`` and ``smooth_l1_loss_backward`` passed the gradient through a NaN input
where eager gives 0 or NaN (aotgrad.eager_gradients). 64 elements: every one of them runs in
eager's vectorized loop (a tensor's last few elements run in a scalar loop that treats NaN
differently from the vectorized one).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from aotgrad_helpers import strict

import aotgrad

_SPECIAL = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 6.0, -6.0, 3.0, -3.0, 1.0, -1.0, 20.0, 0.5]

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu6": F.relu6,
    "hardtanh": lambda x: F.hardtanh(x, -1.0, 3.0),
    "elu": F.elu,
    "elu_inplace": lambda x: F.elu(x * 1, inplace=True),  # elu_backward of the result
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.5),
    "hardswish": F.hardswish,
    "smooth_l1": lambda x: F.smooth_l1_loss(x, torch.full_like(x, 0.25), reduction="none", beta=0.5),
}


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_activation_gradients_match_eager_at_special_values(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(43)
    x = torch.randn(64, generator=generator, dtype=dtype) * 4
    x[: len(_SPECIAL)] = torch.tensor(_SPECIAL, dtype=dtype)
    x[40 : 40 + len(_SPECIAL)] = torch.tensor(_SPECIAL, dtype=dtype)
    cotangents = [torch.randn(64, generator=generator, dtype=dtype) for _ in _ACTIVATIONS]

    def fn(*inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(f(i) for f, i in zip(_ACTIVATIONS.values(), inputs, strict=True))

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())

    def gradients(f: Callable[..., tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, ...]:
        leaves = [x.clone().requires_grad_(True) for _ in _ACTIVATIONS]
        return torch.autograd.grad(f(*leaves), leaves, cotangents)

    for name, got, want in zip(_ACTIVATIONS, gradients(compiled), gradients(fn), strict=True):
        # NaN where eager has NaN, 0 where eager has 0; exp's last bit may differ (elu).
        torch.testing.assert_close(got, want, equal_nan=True, rtol=1e-6, atol=1e-7, msg=lambda m, n=name: f"{n}: {m}")


_WHOLE_REDUCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "max": torch.max,
    "min": torch.min,
    "median": torch.median,
    "nanmedian": torch.nanmedian,
}


@pytest.mark.parametrize("name", sorted(_WHOLE_REDUCTIONS))
def test_whole_tensor_reduction_gradients_keep_zeros_beside_a_nan_share(name: str) -> None:
    # The gradient of x.max() goes to the positions equal to the result; eager's CPU kernel fills
    # zeros elsewhere even when the share is NaN or infinite (here the std of one element is NaN,
    # its gradient NaN), where the traced formula `mask * share` gave NaN everywhere.
    reduce = _WHOLE_REDUCTIONS[name]

    def fn(x: torch.Tensor) -> torch.Tensor:
        return reduce(x).std(-1, keepdim=True)

    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    x = torch.randn(6, generator=torch.Generator().manual_seed(7))
    x[2] = x[4]  # a tie: both positions share the gradient
    grads = []
    for f in (compiled, fn):
        leaf = x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(f(leaf).sum(), leaf)
        grads.append(grad)
    got, want = grads
    assert int(want.isnan().sum()) <= 2 and int((want == 0).sum()) >= 4
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
