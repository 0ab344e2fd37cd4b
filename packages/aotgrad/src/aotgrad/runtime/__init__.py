"""The runtime side: the autograd.Function around compiled forward/backward, and the wrapper that
applies input mutations and rebuilds aliasing outputs."""

from aotgrad.runtime.boxed import BoxedGraph, boxed_graph_module, call_boxed
from aotgrad.runtime.wrapper import CompiledInference, CompiledTraining, RaisingRegion, Region

__all__ = ["BoxedGraph", "CompiledInference", "CompiledTraining", "RaisingRegion", "Region", "boxed_graph_module", "call_boxed"]
