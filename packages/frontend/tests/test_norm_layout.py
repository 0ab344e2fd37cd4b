"""Batch norm and ``normal`` of a non-contiguous input return eager's (contiguous) layout.

Eager's batch norm lays its output out by the input's suggested memory format (contiguous unless
the input is channels-last), and ``normal`` with a tensor ``std`` is contiguous; torch's fake
kernels follow the input's strides. The compiled function returned the input's layout for a
transposed 3-d input, and a later ``.view(-1)``, which eager accepts, raised (after the graph break
capture made where its fake strides refused the view).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import frontend

F = torch.nn.functional

_MODULE = torch.nn.BatchNorm1d(5)
OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "batch_norm_eval": lambda x: F.batch_norm(x, torch.zeros(5), torch.ones(5) * 2, training=False),
    "batch_norm_module": lambda x: _MODULE(x),
    "normal": lambda x: torch.normal(x, x.abs() * 0),  # a zero std: the mean, exactly
}


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_a_view_of_the_result_works_as_in_eager(name: str, grad: bool) -> None:
    op = OPS[name]

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = op(x)
        return out, out.view(-1) * 2

    compiled = frontend.compile(fn, options={"fallback_to_eager": False})
    for grow in (0, 0, 1, 3):  # the third call recompiles with symbolic sizes
        results = []
        for run in (fn, compiled):
            g = torch.Generator().manual_seed(grow)
            x = torch.randn(4 + grow, 5, 6 + grow, generator=g).transpose(0, 2).requires_grad_(grad)
            with torch.set_grad_enabled(grad):
                out, flat = run(x)
            grads = torch.autograd.grad((flat * torch.randn(flat.shape, generator=g)).sum(), x) if grad else ()
            results.append((out, flat, *grads))
        (want, *want_rest), (got, *got_rest) = results
        assert got.stride() == want.stride(), f"call at +{grow}: strides {got.stride()} compiled, {want.stride()} eager"
        for got_value, want_value in zip((got, *got_rest), (want, *want_rest)):
            torch.testing.assert_close(got_value, want_value, rtol=1e-4, atol=1e-4)
