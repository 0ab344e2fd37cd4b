"""What a Triton kernel call needs besides its source, as plain data; and the saved record of a graph's kernels.

`KernelSignature` is the part of a `KernelGroup` that launching a kernel reads (its buffers' dtypes,
its size symbols, its device): `TritonKernelCall` runs from a signature and a `GeneratedKernel`, so a
kernel loaded from a `SavedTritonKernels` (the payload of `TritonBackend.export_kernels`) needs no
group. Every field here pickles (SymPy symbols, torch dtypes, strings, the launcher's configs).

A kernel over symbolic sizes that indexes in int32 switches to an int64-indexing variant when a
tensor turns out to exceed 2**31 - 1 elements. A loaded kernel has no group to generate that variant
from, so the export generates it eagerly and saves it beside the kernel (`SavedKernel.int64`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
import torch

from codegen_triton.codegen.template import GeneratedKernel
from codegen_triton.runtime.autotune import LaunchConfig
from inductor_ir.backend import KernelGroup

__all__ = ["KernelSignature", "SavedKernel", "SavedTritonKernels", "TunedLaunch", "may_overflow_int32"]


@dataclass(frozen=True)
class KernelSignature:
    """How the wrapper calls one kernel: ``(*inputs, *outputs, *size_ints)``, on one device.

    Attributes:
        name: the group's name (``fused_sin_cos_0``).
        device: the group's device (``cuda:0``, ``cpu``).
        input_dtypes: the dtypes of the input buffers, in argument order.
        output_dtypes: the dtypes of the output buffers, in argument order.
        size_symbols: the size symbols whose values follow the buffers (``s0, s1``).
        in_place: positions among the outputs of those written over an input (one pointer for both).
    """

    name: str
    device: str
    input_dtypes: tuple[torch.dtype, ...]
    output_dtypes: tuple[torch.dtype, ...]
    size_symbols: tuple[sympy.Symbol, ...]
    in_place: tuple[int, ...]

    @classmethod
    def of(cls, group: KernelGroup) -> KernelSignature:
        """The signature of the kernel generated for ``group``."""
        over = {b.output for b in group.in_place}
        return cls(
            group.name,
            group.device,
            tuple(r.dtype for r in group.inputs),
            tuple(r.dtype for r in group.outputs),
            tuple(group.size_symbols),
            tuple(k for k, r in enumerate(group.outputs) if r.name in over),
        )

    @property
    def buffer_count(self) -> int:
        """How many tensor arguments come before the size ints."""
        return len(self.input_dtypes) + len(self.output_dtypes)


def may_overflow_int32(signature: KernelSignature, generated: GeneratedKernel) -> bool:
    """Whether a tensor of this kernel may exceed its int32 indexing at run time (symbolic sizes and
    int32 indices: static sizes were checked when the kernel was generated)."""
    return bool(signature.size_symbols) and ".to(tl.int64) * XBLOCK" not in generated.source


@dataclass(frozen=True)
class TunedLaunch:
    """An autotuned launch configuration of one kernel function, as its launcher chose it.

    Attributes:
        function: the kernel function's name.
        source: the SHA-256 of its module's source (variants of one name differ in source).
        device: the name of the GPU it was timed on (``torch.cuda.get_device_name``).
        bucket: the sizes it was chosen for (xnumel, rnumel, ynumel rounded up to powers of two).
        config: the winner.
    """

    function: str
    source: str
    device: str
    bucket: tuple[int, int, int]
    config: LaunchConfig


@dataclass(frozen=True)
class SavedKernel:
    """One kernel of a saved graph.

    Attributes:
        signature: how it is called.
        generated: the kernel as generated (module source, launch plan, variants).
        int64: its int64-indexing variant, when `may_overflow_int32` (else None).
        tuning: the launch configurations autotuning chose for it so far (a loaded kernel starts
            from them on a GPU of the same name instead of timing candidates again).
    """

    signature: KernelSignature
    generated: GeneratedKernel
    int64: GeneratedKernel | None
    tuning: tuple[TunedLaunch, ...]


@dataclass(frozen=True)
class SavedTritonKernels:
    """The payload of a Triton `KernelArtifact` (see the module docstring).

    Attributes:
        device_type: the exporting backend's device type ("cuda"; "cpu" for the interpreter switch).
        interpret: whether the kernels were written for Triton's interpreter (their math imports differ).
        kernels: one per name of the artifact, in order.
    """

    device_type: str
    interpret: bool
    kernels: tuple[SavedKernel, ...]
