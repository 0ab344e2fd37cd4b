"""Results laid out as eager lays them out where torch's fake kernels and decompositions differ
(`aotgrad/eager_layout.py`): batch norm (contiguous unless its input is channels-last), ``normal``
with a tensor ``std`` (contiguous) and ``native_dropout_backward`` (its operands' layout).

Batch norm of a transposed 3-d input followed the input's strides: its output refused the
``.view(-1)`` eager accepts, in the trace, or in the user's code on the compiled graph's output.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from aotgrad_helpers import strict
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

import aotgrad

aten = torch.ops.aten

OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "batch_norm_running_stats": lambda x: F.batch_norm(
        x, torch.zeros(x.shape[1]), torch.ones(x.shape[1]), torch.linspace(-1, 2, x.shape[1]), None, training=True
    ),
    "batch_norm_eval": lambda x: F.batch_norm(x, torch.zeros(x.shape[1]), torch.ones(x.shape[1]) + 1),
    "normal_of_a_tensor_std": lambda x: torch.normal(x, x.abs() * 0),  # a zero std: the mean, exactly
    "normal_of_a_number_mean": lambda x: torch.normal(0.0, x.abs() * 0) + x,
    "dropout_backward": lambda x: aten.native_dropout_backward(x, x > 0, 2.0),
}

LAYOUTS: dict[str, Callable[[torch.Generator], torch.Tensor]] = {
    "transposed_3d": lambda g: torch.randn(4, 5, 6, generator=g).transpose(0, 2),
    "transposed_2d": lambda g: torch.randn(5, 6, generator=g).t(),
    "permuted_4d": lambda g: torch.randn(3, 4, 2, 5, generator=g).permute(2, 3, 0, 1),
    "channels_last": lambda g: torch.randn(2, 5, 3, 4, generator=g).contiguous(memory_format=torch.channels_last),
    "stepped": lambda g: torch.randn(6, 5, 8, generator=g)[:, :, ::2],
}


def _view_where_eager_can(op: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], tuple[torch.Tensor, ...]]:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = op(x)
        return (out, out.view(-1) * 2) if out.is_contiguous() else (out,)

    return fn


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("name", sorted(OPS))
def test_results_have_eagers_strides(name: str, layout: str, grad: bool) -> None:
    op = OPS[name]
    x = LAYOUTS[layout](torch.Generator().manual_seed(0))
    want_contiguous = op(x).is_contiguous()  # the fake kernel's layout decides `fn`'s view in the trace
    fn = _view_where_eager_can(op)
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    results = []
    for run in (fn, compiled):
        x = LAYOUTS[layout](torch.Generator().manual_seed(0)).requires_grad_(grad)
        with torch.set_grad_enabled(grad):
            outs = run(x)
        grads = torch.autograd.grad(outs[0].sum() * 3 + outs[-1].square().sum(), x) if grad else ()
        results.append((outs, grads))
    (want, want_grads), (got, got_grads) = results
    assert len(got) == len(want) == (2 if want_contiguous else 1)
    for got_value, want_value in zip(got, want):
        torch.testing.assert_close(got_value, want_value)
    for got_value, want_value in zip(got_grads, want_grads):  # batch norm's: sums that cancel
        torch.testing.assert_close(got_value, want_value, rtol=1e-4, atol=1e-4)
    got_strides, want_strides = [o.stride() for o in got], [o.stride() for o in want]
    assert got_strides == want_strides, f"strides {got_strides} compiled, {want_strides} eager"


@pytest.mark.parametrize("name", ["batch_norm", "batch_norm_eval", "normal_of_a_tensor_std"])
def test_results_of_symbolic_sizes_have_eagers_strides(name: str) -> None:
    op = OPS[name]
    fn = _view_where_eager_can(op)
    mode = FakeTensorMode(shape_env=ShapeEnv())
    dynamic = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC, DimDynamic.STATIC, DimDynamic.DYNAMIC])
    fake = mode.from_tensor(torch.randn(4, 5, 6).transpose(0, 2), symbolic_context=dynamic)
    assert isinstance(fake.shape[0], torch.SymInt)
    compiled = aotgrad.aot_graph(fn, [fake], fw_compiler=aotgrad.eager_compiler, config=strict())
    for n in (4, 7):
        x = torch.randn(n, 5, n + 2, generator=torch.Generator().manual_seed(n)).transpose(0, 2)
        got, want = compiled(x), fn(x)
        assert len(got) == len(want) == 2
        for got_value, want_value in zip(got, want):
            torch.testing.assert_close(got_value, want_value)
            assert got_value.stride() == want_value.stride()
