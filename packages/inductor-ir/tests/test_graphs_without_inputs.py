"""A graph with no inputs (arange, zeros, full, eye, window functions) compiles: its wrapper has
nothing to unpack from ``args``."""

from __future__ import annotations

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


def _constants() -> tuple[torch.Tensor, ...]:
    return torch.arange(7) * 3, torch.full((2, 3), 1.5), torch.eye(3) + torch.zeros(3, 3), torch.linspace(0, 1, 5)


def test_graph_without_inputs_matches_eager() -> None:
    gm = make_fx(_constants, decomposition_table=inductor_ir.decompositions())()
    compiled = inductor_ir.compile_graph(gm, [], backends={"cpu": ReferenceBackend()})
    assert " = args" not in compiled.wrapper
    assert_close(compiled(), _constants())
