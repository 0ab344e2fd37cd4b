"""The ``cudagraphs`` backend: aotgrad's ATen graphs run by PyTorch, replayed as CUDA graphs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from frontend.backends._aot import aot_compile
from frontend.backends.fallback import fall_back, graph_device_types
from frontend.context import CompileContext
from frontend.cudagraphs import CudaGraphRunner


def cudagraphs_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], context: CompileContext) -> Callable[..., Any]:
    """Trace forward/backward with aotgrad and replay each as CUDA graphs (CUDA graphs only)."""
    devices = graph_device_types(gm, example_inputs)
    if devices != {"cuda"}:
        return fall_back(gm, context, "a graph", f"the cudagraphs backend needs CUDA tensors, this graph is on {sorted(devices)}")
    artifacts = context.artifacts

    def replayed(which: str) -> Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]:
        def compile_aten(aten_gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
            if artifacts is not None:
                artifacts.write_graph(f"aten_{which}.py", aten_gm)
            return CudaGraphRunner(aten_gm, context, which)

        return compile_aten

    return aot_compile(gm, example_inputs, context, fw_compiler=replayed("forward"), bw_compiler=replayed("backward"))
