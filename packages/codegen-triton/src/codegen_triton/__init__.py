"""Triton kernel generator for Kiln's inductor-ir (CUDA devices).

`TritonBackend` implements `inductor_ir.backend.KernelBackend` for `cuda`: one Triton kernel per fused
group (pointwise, 2-D tiled, persistent and looped reductions), launched with autotuned block sizes.
`TritonConfig` holds its settings. See docs/codegen-triton.md.
"""

from codegen_triton._version import __version__
from codegen_triton.backend import RandomFallbackRequired, TritonBackend, TritonKernelCall, TritonKernelSource
from codegen_triton.config import TritonConfig

__all__ = [
    "RandomFallbackRequired",
    "TritonBackend",
    "TritonConfig",
    "TritonKernelCall",
    "TritonKernelSource",
    "__version__",
]
