"""Running generated Triton kernels: loading, launch grids, autotuning and its disk cache."""

from codegen_triton.runtime.autotune import LaunchConfig, TuningCache, candidate_configs
from codegen_triton.runtime.launcher import KernelSpec, TritonLauncher
from codegen_triton.runtime.loader import load_kernel_module

__all__ = [
    "KernelSpec",
    "LaunchConfig",
    "TritonLauncher",
    "TuningCache",
    "candidate_configs",
    "load_kernel_module",
]
