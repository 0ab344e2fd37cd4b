"""Decompositions that write in place into tensors they allocate.

make_fx applies the decomposition table below functionalization, so an in-place op inside a
decomposition reaches the graph as it is. torch 2.11 (the GPU machines' torch) decomposes a
non-in-place `index_fill` of a tensor with non-contiguous strides into `index_put` then
`torch.empty_like(x).copy_(filled)`, to keep `x`'s strides; the inference trace kept that `copy_`
and failed ("in-place op `aten.copy_.default` survived functionalization"). The tests stand in for
that torch with such a decomposition of their own, so they fail on the old code with any torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from aotgrad_helpers import RecordingCompiler, seeded_leaf, strict
from torch._subclasses.fake_tensor import FakeTensorMode

import aotgrad

aten = torch.ops.aten


def _index_fill_written_in_place(write: str) -> Callable[..., torch.Tensor]:
    """A decomposition of `x.index_fill(dim, index, value)` that fills a contiguous tensor, then writes
    it in place into a fresh tensor with `x`'s strides: by `copy_` (torch 2.11's decomposition) or by
    `add_` into zeros (fake CUDA tensors cannot `copy_` in a torch built without CUDA)."""

    def index_fill(x: torch.Tensor, dim: int, index: torch.Tensor, value: Any) -> torch.Tensor:
        indices: list[torch.Tensor | None] = [None] * dim + [index]
        fill = torch.scalar_tensor(value, dtype=x.dtype, device=x.device)
        filled = aten.index_put.default(x.contiguous(), indices, fill)
        if write == "copy_":
            return torch.empty_like(x).copy_(filled)
        return torch.zeros_like(x).add_(filled)

    return index_fill


def _writing_table(write: str = "copy_") -> dict[Any, Any]:
    return {
        **aotgrad.default_decompositions(),
        aten.index_fill.int_Scalar: _index_fill_written_in_place(write),
    }


def program(a2: torch.Tensor, a11: torch.Tensor) -> tuple[torch.Tensor]:
    return (a2.index_fill(1, a11 % a2.size(1), 2.0),)


def _strides(t: torch.Tensor) -> list[int]:
    """`t`'s strides where they matter (a dim of size 1 may have any)."""
    return [stride for size, stride in zip(t.shape, t.stride()) if size > 1]


def _in_place_ops(gm: torch.fx.GraphModule) -> list[str]:
    return [
        str(node.target)
        for node in gm.graph.nodes
        if isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable
    ]


def test_index_fill_of_a_transposed_cuda_tensor_traces_functionally() -> None:
    """fuzz 88a60d62fa: `a2.index_fill(1, a11 % a2.size(1), 2.0)` of a transposed uint8 CUDA tensor,
    no_grad, failed to trace under torch 2.11 (its decomposition's `copy_`; the fuzzer ran only on the
    GPU). Fake CUDA inputs: no GPU needed."""
    mode = FakeTensorMode()
    with mode:
        a2 = torch.empty(1, 1, 2, 2, dtype=torch.uint8, device="cuda").transpose(1, 2)
        a11 = torch.empty(1, dtype=torch.int64, device="cuda")
    recorder = RecordingCompiler()
    with torch.no_grad():
        aotgrad.aot_graph(
            program, [a2, a11], fw_compiler=recorder, decompositions=_writing_table("add_"), config=strict()
        )
    (gm,) = recorder.graphs
    assert _in_place_ops(gm) == []
    (out,) = next(node for node in gm.graph.nodes if node.op == "output").args[0]
    value = out.meta["val"]
    assert value.device.type == "cuda" and _strides(value) == _strides(a2)


@pytest.mark.parametrize("layout", ["transposed", "contiguous"])
def test_index_fill_through_a_copying_decomposition_gives_eagers_result(layout: str) -> None:
    """fuzz 88a60d62fa on CPU tensors: the compiled graph's values and strides are eager's."""

    def make_inputs() -> list[torch.Tensor]:
        a2 = seeded_leaf(905002715000, (1, 1, 2, 2), torch.uint8)
        return [
            a2.transpose(1, 2) if layout == "transposed" else a2,
            seeded_leaf(905002715003, (1,), torch.int64),
        ]

    compiled = aotgrad.aot_function(
        program, fw_compiler=aotgrad.eager_compiler, decompositions=_writing_table(), config=strict()
    )
    with torch.no_grad():
        (want,), (got,) = program(*make_inputs()), compiled(*make_inputs())
    assert torch.equal(got, want) and _strides(got) == _strides(want)


def test_index_fill_through_a_copying_decomposition_under_autograd() -> None:
    """fuzz 88a60d62fa's decomposition in the joint trace (a float input that requires grad), which
    traces its writes functional again (`trace_joint`): values and gradient are eager's."""

    def fn(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return x.index_fill(2, index, -1.5) * x

    def make_inputs() -> list[torch.Tensor]:
        x = seeded_leaf(7, (3, 4, 2)).transpose(1, 2).detach().requires_grad_()
        return [x, torch.tensor([0, 3])]

    compiled = aotgrad.aot_function(
        fn, fw_compiler=aotgrad.eager_compiler, decompositions=_writing_table(), config=strict()
    )
    results = []
    for f in (fn, compiled):
        x, index = make_inputs()
        out = f(x, index)
        (grad,) = torch.autograd.grad(out, x, torch.ones_like(out))
        results.append((out.detach(), grad))
    (want, want_grad), (got, got_grad) = results
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grad, want_grad)
