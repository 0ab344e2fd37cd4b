"""Saved graphs: a compiled graph as plain data, to run again in another process without recompiling.

`save_compiled_graph` records a `CompiledGraph`'s wrapper (its source and the values bound in its
namespace) and, per device type, what its kernel backend makes of its kernels (a `KernelArtifact`,
through the optional `ReloadableKernelBackend` methods). `load_saved_graph` executes the wrapper
again with the kernels its backends load from those artifacts: no lowering, scheduling, code
generation or compiling. How the record is stored (its bytes, its integrity) is the caller's concern.

Example::

    saved = save_compiled_graph(compiled, backends)     # plain, picklable data
    graph = load_saved_graph(saved, backends)           # in a later process
    graph(*inputs)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
import torch.utils._pytree as pytree

from inductor_ir.backend import KernelSource
from inductor_ir.compile import CompiledGraph, _expected_inputs
from inductor_ir.wrapper import exec_wrapper, wrapper_source_and_constants

__all__ = ["KernelArtifact", "LoadedGraph", "NotSaveable", "ReloadableKernelBackend", "SavedGraph",
           "load_saved_graph", "save_compiled_graph"]


class NotSaveable(Exception):
    """A compiled graph that cannot be saved (a backend that cannot export its kernels, ...)."""


@dataclass(frozen=True)
class KernelArtifact:
    """One kernel backend's record of the compiled kernels of one graph.

    Attributes:
        device_type: the backend's device type.
        names: the kernels' names, as the wrapper calls them, in the order `load_kernels` returns them.
        payload: the backend's own data (plain, picklable values: sources, library keys or bytes,
            tuning choices); only that backend reads it.
    """

    device_type: str
    names: tuple[str, ...]
    payload: Any


@runtime_checkable
class ReloadableKernelBackend(Protocol):
    """The optional part of `KernelBackend` that lets compiled graphs be saved and loaded again."""

    device_type: str

    def export_kernels(self, sources: Sequence[KernelSource]) -> KernelArtifact:
        """A record of `sources`, compiled by this backend earlier in this process."""
        ...

    def load_kernels(self, artifact: KernelArtifact) -> Sequence[Callable[..., None]]:
        """The kernels of `artifact` (one per name), without generating them again; raises if it cannot."""
        ...


@dataclass(frozen=True)
class SavedGraph:
    """A compiled graph as data (see the module docstring).

    Attributes:
        wrapper: the wrapper module's source (defines ``call(args)``).
        constants: the values its namespace binds by name (tensors, devices, ops, ...).
        kernels: one artifact per device type.
        output_spec: the structure of the graph's outputs (None: a flat tuple).
        expected_inputs: (position, dtype, sizes with None where symbolic) of each tensor input.
        num_inputs: how many inputs the graph takes.
        static: whether every size is static (no size symbols).
    """

    wrapper: str
    constants: Mapping[str, Any]
    kernels: tuple[KernelArtifact, ...]
    output_spec: pytree.TreeSpec | None
    expected_inputs: tuple[tuple[int, torch.dtype, tuple[int | None, ...]], ...]
    num_inputs: int
    static: bool


def save_compiled_graph(compiled: CompiledGraph, backends: Mapping[str, Any]) -> SavedGraph:
    """`compiled` as a `SavedGraph`, its kernels exported by the backends that compiled them.

    Raises:
        NotSaveable: a backend has no `export_kernels`, or the wrapper's source is not what it was.
    """
    source, constants = wrapper_source_and_constants(compiled.schedule, compiled.kernel_names)
    if source != compiled.wrapper:
        raise NotSaveable("the wrapper's source could not be generated again identically")
    by_device: dict[str, list[KernelSource]] = {}
    for kernel in compiled.sources:
        by_device.setdefault(kernel.group.device_type, []).append(kernel)
    artifacts = []
    for device_type, sources in by_device.items():
        backend = backends.get(device_type)
        if not callable(getattr(backend, "export_kernels", None)) or not callable(getattr(backend, "load_kernels", None)):
            raise NotSaveable(f"the {device_type!r} kernel backend cannot export its kernels")
        artifacts.append(backend.export_kernels(sources))  # type: ignore[union-attr]
    program = compiled.program
    return SavedGraph(
        wrapper=source,
        constants=constants,
        kernels=tuple(artifacts),
        output_spec=program.output_spec,
        expected_inputs=tuple(_expected_inputs(program)),
        num_inputs=len(program.graph_inputs),
        static=not program.size_sources,
    )


class LoadedGraph:
    """A saved graph loaded again: called like the `CompiledGraph` it was saved from.

    ``call(args)`` is the wrapper's own entry (boxed: it empties `args`); calling the graph itself
    checks the inputs' count, dtypes and static sizes, then returns outputs in their structure.
    """

    def __init__(self, saved: SavedGraph, call: Callable[[list[Any]], Any]) -> None:
        self.saved = saved
        self.call = call
        self.output_spec = saved.output_spec

    def __call__(self, *args: Any) -> Any:
        """Run the wrapper on the flat inputs (one list of them also works)."""
        if len(args) == 1 and isinstance(args[0], list) and self.saved.num_inputs != 1:
            args = tuple(args[0])
        self._check(args)
        outputs = self.call(list(args))
        if self.output_spec is not None:
            return pytree.tree_unflatten(list(outputs), self.output_spec)
        return tuple(outputs)

    def _check(self, args: Sequence[Any]) -> None:
        if len(args) != self.saved.num_inputs:
            raise TypeError(f"this compiled graph takes {self.saved.num_inputs} inputs, got {len(args)}")
        for position, dtype, shape in self.saved.expected_inputs:
            value = args[position]
            if not (isinstance(value, torch.Tensor) and value.dtype == dtype and value.dim() == len(shape)
                    and all(n is None or n == m for n, m in zip(shape, value.shape))):
                got = f"{value.dtype} {list(value.shape)}" if isinstance(value, torch.Tensor) else type(value).__name__
                raise ValueError(f"input {position} was compiled as {dtype} {list(shape)}, got {got}")

    def artifacts(self) -> dict[str, str]:
        """The wrapper's source (``wrapper.py``), as `CompiledGraph.artifacts` names it."""
        return {"wrapper.py": self.saved.wrapper}


def load_saved_graph(saved: SavedGraph, backends: Mapping[str, Any]) -> LoadedGraph:
    """Load `saved` with `backends` (device type -> kernel backend): its kernels, then its wrapper.

    Raises:
        NotSaveable: no backend (or one without `load_kernels`) for one of its device types.
        Exception: whatever a backend raises when it cannot load its kernels.
    """
    kernels: dict[str, Callable[..., None]] = {}
    for artifact in saved.kernels:
        backend = backends.get(artifact.device_type)
        if not callable(getattr(backend, "load_kernels", None)):
            raise NotSaveable(f"no kernel backend that can load {artifact.device_type!r} kernels")
        loaded = list(backend.load_kernels(artifact))  # type: ignore[union-attr]
        if len(loaded) != len(artifact.names):
            raise NotSaveable(f"the {artifact.device_type!r} backend loaded {len(loaded)} of {len(artifact.names)} kernels")
        kernels.update(zip(artifact.names, loaded))
    return LoadedGraph(saved, exec_wrapper(saved.wrapper, saved.constants, kernels))
