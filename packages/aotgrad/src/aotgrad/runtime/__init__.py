"""The runtime side: the autograd.Function around compiled forward/backward, and the wrapper that
applies input mutations and rebuilds aliasing outputs."""

from aotgrad.runtime.wrapper import CompiledInference, CompiledTraining, Region

__all__ = ["CompiledInference", "CompiledTraining", "Region"]
