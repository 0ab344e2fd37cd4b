"""The `KernelBackend` protocol and the records a backend receives for one fused group.

A code generator (Triton, C++, yours) implements :class:`KernelBackend`. The scheduler asks it
which fusions it supports, hands it one :class:`KernelGroup` per fused kernel and asks for source
text (:meth:`KernelBackend.generate`), then compiles all kernels of one graph at once
(:meth:`KernelBackend.compile`). The wrapper calls each compiled kernel as
``kernel(*input_tensors, *output_tensors, *size_ints)`` in the order of ``KernelGroup.inputs``,
``KernelGroup.outputs`` and ``KernelGroup.size_symbols``; no two of those tensors share memory. An
output written over a dying input's memory (``KernelGroup.in_place``) is one argument: the kernel
loads that input and stores that output through the same pointer. See docs/kernel-backend.md.

A backend a frontend builds from user options (what a ``kiln.kernel_backends`` entry point loads)
is a :class:`ConfigurableKernelBackend`: its class parses its own options
(``parse_options(dict)``, rejecting unknown keys with the list of known ones, as Triton's backends
do) and is constructed with the result (``cls(config=...)``); ``hash()`` states its identity for
cache keys.

A backend may also have an ``eager_ops`` attribute: ATen ops that ``compile_graph`` must not lower
(nor should a frontend decompose them) but run as ATen calls (``FallbackKernel``), e.g.
:data:`RANDOM_OPS` when random numbers must come from torch's own generator (bit-identical to
eager under the same seed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import sympy
import torch

__all__ = [
    "COMMON_BACKEND_OPTIONS",
    "RANDOM_OPS",
    "BufferRecord",
    "ConfigurableKernelBackend",
    "InPlaceBuffer",
    "KernelBackend",
    "KernelGroup",
    "KernelNode",
    "KernelSource",
    "NodeBody",
]

_ZERO = sympy.Integer(0)


def _overloads(*names: str) -> frozenset[Any]:
    ops = torch.ops.aten
    found = [getattr(ops, name, None) for name in names]
    return frozenset(getattr(packet, o) for packet in found if packet is not None for o in packet.overloads())


RANDOM_OPS: frozenset[Any] = _overloads(
    "rand", "rand_like", "randn", "randn_like", "randint", "randint_like", "randperm", "bernoulli",
    "bernoulli_", "native_dropout", "normal", "normal_", "uniform", "uniform_", "exponential",
    "exponential_", "geometric", "geometric_", "log_normal", "log_normal_", "cauchy", "cauchy_",
    "multinomial", "poisson", "random", "random_", "rrelu", "rrelu_with_noise", "rrelu_with_noise_functional",
)
"""Every overload of the ATen ops that draw from torch's random generator (a backend's ``eager_ops``
under ``fallback_random``)."""

NodeBody = Callable[[Sequence[sympy.Expr], Sequence[sympy.Expr]], None]
"""``body(index_vars, reduction_vars)``: calls ``ops.*`` and ends in ``ops.store`` or ``ops.store_reduction``."""


@dataclass(frozen=True)
class BufferRecord:
    """A buffer a kernel touches: its name, dtype and SymPy layout (in elements).

    Element ``(i0, i1, ...)`` lives at ``offset + sum(i_k * stride_k)`` from the data pointer of the
    tensor the wrapper passes; ``ops.load``/``ops.store`` indices already include this arithmetic.
    """

    name: str
    dtype: torch.dtype
    size: tuple[sympy.Expr, ...]
    stride: tuple[sympy.Expr, ...]
    offset: sympy.Expr = _ZERO
    device: str = "cpu"

    def numel(self) -> sympy.Expr:
        """Number of elements, ``prod(size)``."""
        return sympy.Mul(*self.size) if self.size else sympy.Integer(1)


@dataclass(frozen=True)
class KernelNode:
    """One IR node of a fused group: it computes buffer ``buffer.name`` by running ``body``.

    kind: ``"pointwise"`` (body ends in ``ops.store``) or ``"reduction"`` (``ops.reduction`` then
        ``ops.store_reduction``; only in reduction groups, always ``in_reduction_loop``).
    loop: which reduction loop of the group this node belongs to (0, 1, ...; always 0 in a
        pointwise group).
    in_reduction_loop: True: the node runs inside reduction loop ``loop``, once per (pointwise,
        reduction) index, as ``body(index_vars, reduction_vars)``. False: it runs once per pointwise
        index after loop ``loop`` has finished (or directly, in a pointwise group), as
        ``body(index_vars, ())``.
    origins: the ATen op names it was lowered from (for kernel names such as ``fused_sin_cos``).
    """

    buffer: BufferRecord
    body: NodeBody
    kind: Literal["pointwise", "reduction"]
    loop: int = 0
    in_reduction_loop: bool = False
    reduction_type: str | None = None
    origins: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The name of the buffer this node writes."""
        return self.buffer.name

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the buffer this node writes."""
        return self.buffer.dtype


@dataclass(frozen=True)
class InPlaceBuffer:
    """An output of a kernel written over the memory of one of its inputs, which dies in the kernel.

    The wrapper passes one tensor for both: the kernel loads ``input`` and stores ``output``
    through the same pointer argument (an in/out pointer, e.g. ``in_out_ptr0``), never through two
    (two pointers to one memory would break ``__restrict__`` and similar no-alias promises). The
    scheduler guarantees every load of ``input`` uses ``output``'s store index and comes before
    that store, so element-wise load-then-store is safe.
    """

    input: BufferRecord
    output: str


@dataclass(frozen=True)
class KernelGroup:
    """Everything a backend needs to generate one kernel for a fused group of IR nodes.

    name: unique within the graph, e.g. ``fused_sin_cos_0``; a backend prefixes it
        (``triton_poi_fused_sin_cos_0``, ``cpp_fused_sin_cos_0``).
    device: the torch device string of every buffer (``"cpu"``, ``"cuda:0"``).
    pointwise_size / reduction_size: the iteration space; ``reduction_size`` is ``()`` for a
        pointwise group. Index variables passed to bodies range over these.
    nodes: in execution order (sorted by ``(loop, not in_reduction_loop)``); see KernelNode.
    inputs: buffers read and not written by the group (kernel arguments, in this order), except
        those in ``in_place``.
    outputs: buffers written by the group that are needed after it (arguments, after the inputs);
        the wrapper allocates them (or hands over a dying input's memory: ``in_place``).
    internal: buffers written and read only inside the group, always at the index where they are
        stored: the backend keeps them in registers and the wrapper never allocates them.
    size_symbols: free symbols of all sizes/strides/indices (``s0``, ``s1``, ...), passed as ints
        after the buffers.
    in_place: inputs whose memory an output takes over (see :class:`InPlaceBuffer`): such an
        input is no argument of its own; load it through its output's pointer
        (:meth:`pointer_names` gives both names the same one).
    """

    name: str
    device: str
    pointwise_size: tuple[sympy.Expr, ...]
    reduction_size: tuple[sympy.Expr, ...]
    nodes: tuple[KernelNode, ...]
    inputs: tuple[BufferRecord, ...]
    outputs: tuple[BufferRecord, ...]
    internal: tuple[BufferRecord, ...] = ()
    size_symbols: tuple[sympy.Symbol, ...] = ()
    in_place: tuple[InPlaceBuffer, ...] = ()

    @property
    def device_type(self) -> str:
        """``"cpu"`` or ``"cuda"``: the device without its index."""
        return self.device.split(":")[0]

    @property
    def is_reduction(self) -> bool:
        """Whether the group has a reduction loop."""
        return len(self.reduction_size) > 0

    @property
    def num_loops(self) -> int:
        """How many reduction loops the group runs (0 for a pointwise group)."""
        if not self.is_reduction:
            return 0
        return 1 + max((node.loop for node in self.nodes), default=0)

    def buffers(self) -> dict[str, BufferRecord]:
        """Every buffer of the group (inputs, those read in place, outputs, internal) by name."""
        records = (*self.inputs, *(b.input for b in self.in_place), *self.outputs, *self.internal)
        return {record.name: record for record in records}

    def pointer_names(self) -> dict[str, str]:
        """Buffer name -> the kernel's pointer argument for it, in argument order (first name per pointer).

        ``in_ptrN`` for the inputs, ``out_ptrN`` for the outputs and ``in_out_ptrN`` for an output
        written in place over an input, whose name maps to the same pointer. Distinct values are
        distinct arguments, in the calling convention's order.
        """
        over = {b.output: b.input.name for b in self.in_place}
        names = {record.name: f"in_ptr{i}" for i, record in enumerate(self.inputs)}
        plain = in_out = 0
        for record in self.outputs:
            if record.name in over:
                names[record.name] = names[over[record.name]] = f"in_out_ptr{in_out}"
                in_out += 1
            else:
                names[record.name] = f"out_ptr{plain}"
                plain += 1
        return names

    def make_index_vars(self) -> tuple[tuple[sympy.Symbol, ...], tuple[sympy.Symbol, ...]]:
        """Default index symbols ``x0, x1, ...`` and ``r0, r1, ...`` (integer, nonnegative)."""
        xs = tuple(sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(len(self.pointwise_size)))
        rs = tuple(sympy.Symbol(f"r{i}", integer=True, nonnegative=True) for i in range(len(self.reduction_size)))
        return xs, rs


@dataclass(frozen=True)
class KernelSource:
    """Generated source of one kernel: its name (a valid identifier), text, and the group it came from.

    `compile_graph` hands each source back to the backend that generated it. A backend that needs
    more per kernel (its calling convention, its generator's plan) subclasses this frozen dataclass
    with typed fields of its own (``codegen_cpp.CppKernelSource``, ``codegen_triton.TritonKernelSource``).
    """

    name: str
    source: str
    group: KernelGroup


@runtime_checkable
class KernelBackend(Protocol):
    """A code generator for one device type, found by `compile_graph(..., backends={"cpu": ...})`."""

    device_type: str

    def can_fuse_vertical(self, producer: KernelGroup, consumer: KernelGroup) -> bool:
        """Whether a consumer may be fused after a producer it reads (already legal for the IR)."""
        ...

    def can_fuse_horizontal(self, first: KernelGroup, second: KernelGroup) -> bool:
        """Whether two independent groups may share one kernel (already legal for the IR)."""
        ...

    def generate(self, group: KernelGroup) -> KernelSource:
        """Source text of one kernel computing ``group``."""
        ...

    def compile(self, sources: Sequence[KernelSource]) -> Sequence[Callable[..., None]]:
        """Compile all kernels of one graph; the i-th callable runs ``sources[i]``.

        Each callable takes ``(*input_tensors, *output_tensors, *size_ints)`` in the group's
        order and writes its outputs in place.
        """
        ...


COMMON_BACKEND_OPTIONS: Mapping[str, str] = {
    "max_autotune": "bool: spend longer tuning kernels (more launch configurations tried)",
    "fallback_random": "bool: random ops draw from torch's generator (bit-identical to eager)",
    "runtime_checks": "bool: kernels check indirect indices and integer divisors, raising eager's errors",
    "cache_root": "Path: Kiln's cache folder; the backend keeps its files under it",
}
"""The options a frontend passes every configurable backend's ``parse_options`` besides the user's
own for that device (each backend accepts them all; one that has no use for an option ignores it)."""


@runtime_checkable
class ConfigurableKernelBackend(KernelBackend, Protocol):
    """A `KernelBackend` built from user options, with an identity for cache keys.

    A frontend builds one as ``cls(config=cls.parse_options(options))``, where ``options`` holds
    :data:`COMMON_BACKEND_OPTIONS` and the user's options for this device.
    """

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> Any:
        """This backend's typed options from a dictionary (its own keys and the common ones); an
        unknown key raises ``inductor_ir.OptionError`` listing the valid ones."""
        ...

    def hash(self) -> str:
        """A unique identifier of this backend and the options that change the code it generates."""
        ...
