"""The triage backends: ``eager`` (capture only) and ``aot_eager`` (capture and aotgrad, no codegen)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from frontend.backends._aot import aot_compile
from frontend.context import CompileContext
from frontend.debug import GraphArtifacts


def eager_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], context: CompileContext) -> Callable[..., Any]:
    """Run the captured FX graph with PyTorch as it is (tests capture alone)."""
    return gm.forward


def _keep_graph(artifacts: GraphArtifacts | None, name: str) -> Callable[[torch.fx.GraphModule, list[Any]], Any]:
    """A compiler that returns the ATen graph as it is, writing it to the debug folder first."""

    def keep(aten_gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        if artifacts is not None:
            artifacts.write_graph(f"aten_{name}.py", aten_gm)
        return aten_gm

    return keep


def aot_eager_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], context: CompileContext) -> Callable[..., Any]:
    """aotgrad's functional forward and backward graphs, run with PyTorch (tests capture + aotgrad)."""
    artifacts = context.artifacts
    return aot_compile(
        gm,
        example_inputs,
        context,
        fw_compiler=_keep_graph(artifacts, "forward"),
        bw_compiler=_keep_graph(artifacts, "backward"),
    )
