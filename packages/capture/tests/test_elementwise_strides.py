"""Fake results of floor division and copysign get eager's strides (`symbolic/elementwise_strides.py`).

Operands broadcast from size-1 dims in other memory orders gave torch's fake kernels other strides
than eager's TensorIterator (fuzz adcb72d814): a ``.view(-1)`` of the result, which eager accepts,
failed while tracing, and the call raised where eager returns.
"""

from __future__ import annotations

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
