"""A training forward at symbolic sizes returns its saved values in the strides the backward was
compiled for. A channels-last pooling result, whose strides hold its output size `(s - 1) // 2 + 1`,
came back contiguous: the backward refused it (fuzz e5e41c90a3)."""

from __future__ import annotations

import sympy
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import frontend
from frontend.backends.inductor import _symbolic_strides_changed


def _pool(x: torch.Tensor) -> torch.Tensor:
    return F.avg_pool2d(x, 2, 2, 0, ceil_mode=True, count_include_pad=False, divisor_override=1).abs().amax()


def test_a_channels_last_pooling_result_saved_at_symbolic_sizes() -> None:
    compiled = frontend.compile(_pool, dynamic=True, options={"fallback_to_eager": False})
    for width, seed in ((8, 0), (9, 1), (11, 2)):
        x = torch.randn(1, 8, 1, width, generator=torch.Generator().manual_seed(seed))
        x = x.to(memory_format=torch.channels_last)
        leaf, eager_leaf = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        (grad,) = torch.autograd.grad(compiled(leaf), leaf)
        (want,) = torch.autograd.grad(_pool(eager_leaf), eager_leaf)
        torch.testing.assert_close(grad, want)


def test_other_symbolic_strides_of_saved_values_are_noticed() -> None:
    gm = make_fx(lambda x: (x * 2,), tracing_mode="symbolic")(torch.randn(3, 4))
    (val,) = [n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"]
    rows, cols = (sympy.sympify(s.node.expr) for s in val.shape)
    assert not _symbolic_strides_changed(gm, [(cols, sympy.Integer(1))], saved=1)
    assert _symbolic_strides_changed(gm, [(sympy.Integer(1), rows)], saved=1)
    assert not _symbolic_strides_changed(gm, [(sympy.Integer(1), rows)], saved=0)
