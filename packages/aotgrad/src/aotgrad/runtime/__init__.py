"""The runtime side: the autograd.Function around compiled forward/backward, and the wrapper that
applies input mutations and rebuilds aliasing outputs."""

from aotgrad.runtime.boxed import (
    BoxedCallable,
    BoxedGraph,
    boxed_graph_module,
    call_boxed,
    is_boxed,
    mark_boxed,
)
from aotgrad.runtime.wrapper import CompiledInference, CompiledTraining, RaisingRegion, Region

__all__ = [
    "BoxedCallable",
    "BoxedGraph",
    "CompiledInference",
    "CompiledTraining",
    "RaisingRegion",
    "Region",
    "boxed_graph_module",
    "call_boxed",
    "is_boxed",
    "mark_boxed",
]
