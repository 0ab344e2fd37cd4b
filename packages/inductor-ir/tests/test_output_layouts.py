"""Graph outputs keep the strides FX recorded for them, gaps included.

A training forward's outputs are its backward graph's inputs, and the backward is compiled for the
strides recorded in the joint trace (its wrapper does not check them again). Recurrent layers
(GRU, LSTM) save slices of their gate projections: views of values not yet in memory, whose strides
leave gaps (a (4, 16) slice of a (4, 48) row has strides (48, 1)). Stored contiguous, the backward
read them at the wrong offsets. Each case here lowers views like those, on contiguous and
non-contiguous inputs, and checks the output strides and values against eager, then hands the
outputs to a second graph compiled for the recorded strides, as a backward would be.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


def _gates(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A GRU step's projection split into its gates, per time step (slices of an unrealized add)."""
    projected = (x @ w) + 1.0
    steps = projected.unbind(0)
    return tuple(gate for step in steps for gate in step.split(4, dim=-1))


def _lstm_chunks(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x @ w).sigmoid().chunk(3, dim=-1)


VIEWS: dict[str, Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, ...]]] = {
    "unbind_split": _gates,
    "chunk": _lstm_chunks,
    "select": lambda x, w: ((x @ w).tanh().select(1, 2),),
    "narrow": lambda x, w: ((x @ w).exp().narrow(-1, 3, 5),),
    "step_slice": lambda x, w: ((x @ w).cos()[..., ::3],),
    "transpose": lambda x, w: ((x @ w).neg().transpose(0, 2),),
    "diagonal": lambda x, w: (((x @ w) * 2)[0].diagonal(),),
    "expand": lambda x, w: ((x @ w).sum(0, keepdim=True).relu().expand(3, 5, 12),),
}
LAYOUTS = ("contiguous", "transposed", "sliced")


def _inputs(layout: str) -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [rand(3, 5, 8, layout=layout), rand(8, 12, layout=layout)]


def _same_strides(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """Equal strides, except where a size-1 dim or an expanded (stride 0) recorded dim makes any do."""
    return all(
        n == 1 or e == 0 or a == e for n, a, e in zip(expected.shape, actual.stride(), expected.stride())
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_outputs_have_their_recorded_strides(name: str, layout: str) -> None:
    fn = VIEWS[name]
    example = _inputs(layout)
    gm = make_fx(fn)(*example)
    recorded = [node.meta["val"] for node in gm.graph.find_nodes(op="output")[0].args[0]]
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": ReferenceBackend()})
    got = compiled(*example)
    assert_close(got, fn(*example))
    for out, meta in zip(got, recorded, strict=True):
        assert _same_strides(out, meta), f"output strides {out.stride()}, recorded {meta.stride()}"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_graph_compiled_for_recorded_strides_reads_the_outputs_of_another(layout: str) -> None:
    """The forward/backward hand-off: the second graph is compiled for the first's recorded output
    strides and run on its actual outputs (a GRU backward reading the forward's saved gates)."""
    example = _inputs(layout)
    forward = make_fx(_gates)(*example)
    saved = [node.meta["val"] for node in forward.graph.find_nodes(op="output")[0].args[0]]

    def backward(*gates: torch.Tensor) -> torch.Tensor:
        return sum((g.sigmoid() * (k + 1) for k, g in enumerate(gates)), torch.zeros(5, 4))

    # Example inputs of the recorded sizes and strides (gaps and all), as aotgrad gives the backward.
    like_saved = [torch.empty_strided(m.shape, m.stride()).copy_(torch.randn(m.shape)) for m in saved]
    backward_gm = make_fx(backward)(*like_saved)
    first = inductor_ir.compile_graph(forward, example, backends={"cpu": ReferenceBackend()})
    second = inductor_ir.compile_graph(backward_gm, like_saved, backends={"cpu": ReferenceBackend()})
    torch.testing.assert_close(second(*first(*example)), backward(*_gates(*example)))
