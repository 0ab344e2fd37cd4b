"""Fake results of floor division and copysign get eager's strides (`symbolic/elementwise_strides.py`).

Operands broadcast from size-1 dims in other memory orders gave torch's fake kernels other strides
than eager's TensorIterator (fuzz adcb72d814): a ``.view(-1)`` of the result, which eager accepts,
failed while tracing, and the call raised where eager returns.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import pytest
import torch
from capture_helpers import RecordingBackend

import capture

OPS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc_method": lambda a, b: a.div(b, rounding_mode="trunc"),
    "floor_divide": torch.floor_divide,
    "floordiv_operator": lambda a, b: a // b,
    "copysign": lambda a, b: torch.copysign(a.float(), b),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_view_of_the_result_traces_as_eager_runs(name: str) -> None:
    op = OPS[name]

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return op(a, b).view(-1) * 2

    torch.manual_seed(0)
    a = torch.randn(1, 2, 1) > 0
    b = torch.randn(1, 2, 1).permute(2, 0, 1)  # (1, 1, 2), its size-1 dims in another order
    backend = RecordingBackend()
    torch.testing.assert_close(capture.optimize(backend)(fn)(a, b), fn(a, b))
    assert len(backend.graphs) == 1  # traced, not a graph break
    (view,) = [n for n in backend.graphs[0].graph.nodes if n.target == "view"]
    assert view.args[0].meta["example_value"].stride() == op(a, b).stride()  # the op's result, as eager's


WHOLE_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "batch_norm": lambda x: torch.nn.functional.batch_norm(x, None, None, training=True),
    "torch_batch_norm": lambda x: torch.batch_norm(x, None, None, torch.zeros(5), torch.ones(5), False, 0.1, 1e-5, False),
    "normal": lambda x: torch.normal(x, x.abs() * 0),  # a zero std: the mean, exactly
    "dropout_backward": lambda x: torch.ops.aten.native_dropout_backward(x, x > 0, 2.0),
}


@pytest.mark.parametrize("name", sorted(WHOLE_OPS))
def test_batch_norm_normal_and_dropout_backward_results_have_eagers_strides(name: str) -> None:
    """Batch norm of a transposed 3-d input is contiguous in eager, and so is ``normal`` of a tensor
    ``std``; the fake kernels followed the input's strides, so ``.view(-1)`` of the result was a graph
    break, after which the compiled graph's output raised in the view. ``native_dropout_backward``
    follows its operands' layout where the fake kernel is contiguous."""
    op = WHOLE_OPS[name]
    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(0)).transpose(0, 2)
    eager = op(x)

    def fn(x: torch.Tensor) -> torch.Tensor:
        out = op(x)
        return out.view(-1) * 2 if eager.is_contiguous() else out * 2

    backend = RecordingBackend()
    torch.testing.assert_close(capture.optimize(backend)(fn)(x), fn(x))
    assert len(backend.graphs) == 1  # traced, not a graph break
    *_, last = [n for n in backend.graphs[0].graph.nodes if n.target is operator.mul]
    result = last.args[0]  # the op's node, or the view of it
    result = result.args[0] if result.target == "view" else result
    assert result.meta["example_value"].stride() == eager.stride()


def test_a_batch_norm_module_of_a_transposed_input_is_contiguous_as_in_eager() -> None:
    """The module call (a ``call_module`` node) too: its fake result followed the input's strides,
    and ``.view(-1)`` of it was a graph break."""
    module = torch.nn.BatchNorm1d(5)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return module(x).view(-1) * 2

    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(1)).transpose(0, 2)
    backend = RecordingBackend()
    torch.testing.assert_close(capture.optimize(backend)(fn)(x), torch.nn.BatchNorm1d(5)(x).view(-1) * 2)
    assert len(backend.graphs) == 1  # traced, not a graph break
