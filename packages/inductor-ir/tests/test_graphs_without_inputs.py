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


def _grad_mode_only(with_input: bool, output: str) -> torch.fx.GraphModule:
    """A graph whose only nodes switch grad mode (what capture records for `torch.no_grad()`
    around nothing, or an input returned under `@torch.no_grad`)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x") if with_input else None
    graph.call_function(torch._C._set_grad_enabled, (False,))
    graph.call_function(torch._C._set_grad_enabled, (True,))
    graph.output({"input": (x,), "none": (None,), "empty": ()}[output])
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def test_graph_that_only_switches_grad_mode_compiles() -> None:
    x = torch.randn(3, generator=torch.Generator().manual_seed(2))
    for with_input, output in ((True, "input"), (True, "empty"), (False, "empty"), (False, "none")):
        inputs = [x] if with_input else []
        compiled = inductor_ir.compile_graph(_grad_mode_only(with_input, output), inputs, backends={"cpu": ReferenceBackend()})
        compile(compiled.wrapper, "<wrapper>", "exec")  # valid Python
        result = compiled(*inputs)
        assert torch.is_grad_enabled()
        if output == "input":
            assert_close(result, (x,))
        else:
            assert len(result) == (1 if output == "none" else 0)

