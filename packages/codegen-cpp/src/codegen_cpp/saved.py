"""The C++ backend's record of a graph's compiled kernels (`CppBackend.export_kernels`).

A `SavedLibrary` holds the library's translation units (so its cache key can be computed again,
and the library compiled again where it must be), each kernel's calling convention, the toolchain
fingerprint it was built with, and the library's bytes: a cache folder that lacks the library, on
the same kind of machine, gets it installed (under its key, with its checksum) instead of compiled.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from codegen_cpp.codegen.kernel import CppKernelSource
from codegen_cpp.compile.build import PART_SEPARATOR
from inductor_ir.backend import KernelSource
from inductor_ir.ir.checks import RuntimeCheck

__all__ = ["KernelSpec", "SavedLibrary", "kernel_specs", "library_key"]


@dataclass(frozen=True)
class KernelSpec:
    """How to call one kernel of a library: its symbol, argument counts, checks and ATen ops."""

    name: str
    num_pointers: int
    num_sizes: int
    checks: Mapping[int, RuntimeCheck] | None
    ops: str


@dataclass(frozen=True)
class SavedLibrary:
    """The payload of a C++ `KernelArtifact` (see the module docstring)."""

    parts: tuple[str, ...]
    kernels: tuple[KernelSpec, ...]
    fingerprint: str
    library: bytes


def kernel_specs(sources: Sequence[KernelSource]) -> tuple[KernelSpec, ...]:
    """The calling convention of each kernel of ``sources`` (each a `CppKernelSource`)."""
    return tuple(
        KernelSpec(
            source.name,
            source.num_pointers,
            source.num_sizes,
            source.checks,
            ", ".join(sorted({o for node in source.group.nodes for o in node.origins})),
        )
        for source in cpp_sources(sources)
    )


def cpp_sources(sources: Sequence[KernelSource]) -> list[CppKernelSource]:
    """`sources`, checked to be kernels this backend generated (`CppKernelSource`)."""
    foreign = [type(s).__name__ for s in sources if not isinstance(s, CppKernelSource)]
    if foreign:
        raise TypeError(f"the C++ backend compiles only sources its own generate() made, not {', '.join(foreign)}")
    return list(sources)  # type: ignore[arg-type]


def library_key(parts: Sequence[str], fingerprint: str) -> str:
    """A process-local name of the library built from ``parts`` with a toolchain's ``fingerprint``."""
    return hashlib.sha256(f"{fingerprint}\0{PART_SEPARATOR.join(parts)}".encode()).hexdigest()
