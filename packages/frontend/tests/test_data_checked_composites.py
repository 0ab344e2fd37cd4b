"""cov, corrcoef, quantile and nanquantile compile in one graph and give eager's values and gradients.

Their C++ kernels ask a tensor's value (cov's degrees of freedom, quantile's `q` range), which broke
the graph; capture traces them as the tensor code they compute where the answer is known in
advance (capture/variables/data_checked.py)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch

import frontend


def _rows(seed: int, *shape: int, nan: float = 0.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if nan:
        x = torch.where(torch.rand(shape, generator=g) < nan, float("nan"), x)
    return x


CASES: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[], torch.Tensor]]] = {
    "cov": (torch.cov, lambda: _rows(0, 3, 7)),
    "cov_vector_no_correction": (lambda x: torch.cov(x, correction=0), lambda: _rows(1, 7)),
    "cov_too_few_observations": (lambda x: torch.cov(x, correction=9), lambda: _rows(2, 2, 7)),
    "corrcoef": (torch.corrcoef, lambda: _rows(3, 3, 7)),
    "corrcoef_vector": (torch.corrcoef, lambda: _rows(4, 5)),
    "quantile_all": (lambda x: torch.quantile(x, 0.3), lambda: _rows(5, 4, 6)),
    "quantile_0d": (lambda x: torch.quantile(x, 0.5, dim=0), lambda: _rows(6)),
    "quantile_midpoint_keepdim": (lambda x: torch.quantile(x, 0.37, dim=1, keepdim=True, interpolation="midpoint"),
                                  lambda: _rows(7, 4, 6)),
    "quantile_nearest": (lambda x: torch.quantile(x, 0.37, dim=0, interpolation="nearest"), lambda: _rows(8, 4, 6, 3)),
    "quantile_lower": (lambda x: torch.quantile(x, 0.9, keepdim=True, interpolation="lower"), lambda: _rows(9, 4, 6)),
    "quantile_higher": (lambda x: torch.quantile(x, 0.9, dim=-1, interpolation="higher"), lambda: _rows(10, 4, 6)),
    "quantile_nan_rows": (lambda x: torch.quantile(x, 0.6, dim=1), lambda: _rows(11, 4, 6, nan=0.3)),
    "nanquantile": (lambda x: torch.nanquantile(x, 0.6, dim=1), lambda: _rows(12, 4, 6, nan=0.3)),
    "nanquantile_all_nan": (lambda x: torch.nanquantile(x, 0.6, dim=1), lambda: torch.full((3, 4), float("nan"))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_graph_with_eagers_values_and_gradients(name: str) -> None:
    fn, make = CASES[name]
    frontend.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cov's "degrees of freedom is <= 0"
        assert frontend.explain(fn, make()).graph_break_count == 0
        compiled = frontend.compile(fn, options={"fallback_to_eager": False})
        x, y = make().requires_grad_(), make().requires_grad_()
        got, want = compiled(x), fn(y)
        torch.testing.assert_close(got, want, equal_nan=True)
        cotangent = torch.linspace(-1, 2, want.numel()).reshape(want.shape)
        (gx,) = torch.autograd.grad(got, x, cotangent)
        (gy,) = torch.autograd.grad(want, y, cotangent)
    torch.testing.assert_close(gx, gy, equal_nan=True)


def test_weighted_cov_is_still_recorded_as_a_call_and_bad_q_raises() -> None:
    """cov's weight check (>= 0) has no answer before the call: eager runs it. A number `q` out of
    [0, 1] raises eager's error; a tensor `q` takes torch's own path."""
    frontend.reset()
    x, w, q = _rows(13, 2, 5), torch.tensor([1, 2, 0, 1, 3]), torch.tensor([0.2, 0.7])
    assert frontend.explain(lambda x, w: torch.cov(x, fweights=w), x, w).graph_break_count == 1
    torch.testing.assert_close(frontend.compile(lambda x, w: torch.cov(x, fweights=w))(x, w), torch.cov(x, fweights=w))
    torch.testing.assert_close(frontend.compile(lambda x, q: torch.quantile(x, q))(x, q), torch.quantile(x, q))
    with pytest.raises(RuntimeError, match="q must be in the range"):
        frontend.compile(lambda x: torch.quantile(x, 1.5))(x)
