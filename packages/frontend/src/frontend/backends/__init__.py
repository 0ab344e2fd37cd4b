"""Kiln's backends registry and its built-in backends: eager, aot_eager, inductor, cudagraphs."""

from capture import CompilerFn  # the shape of a backend: capture, which calls backends, owns it
from frontend.backends.cudagraphs import cudagraphs_backend
from frontend.backends.eager import aot_eager_backend, eager_backend
from frontend.backends.inductor import inductor_backend
from frontend.backends.registry import (
    ENTRY_POINT_GROUP,
    REGISTRY,
    BackendEntry,
    BackendRegistry,
    ContextBackend,
    list_backends,
    lookup_backend,
    register_backend,
)

REGISTRY.register("eager", eager_backend, "capture only: runs captured FX graphs with PyTorch", source="builtin")
REGISTRY.register("aot_eager", aot_eager_backend, "capture + aotgrad: runs ATen forward/backward graphs with PyTorch", source="builtin")
REGISTRY.register("inductor", inductor_backend, "capture + aotgrad + inductor_ir: fused C++ (CPU) / Triton (CUDA) kernels", source="builtin")
REGISTRY.register("cudagraphs", cudagraphs_backend, "capture + aotgrad + CUDA graph replay", source="builtin")

__all__ = [
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "BackendEntry",
    "BackendRegistry",
    "CompilerFn",
    "ContextBackend",
    "list_backends",
    "lookup_backend",
    "register_backend",
]
