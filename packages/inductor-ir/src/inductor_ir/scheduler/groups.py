"""Scheduler nodes and fused groups: where each node of a group runs, and whether a merge is legal.

A group has an iteration space ``(pointwise_size, reduction_size)``; each member node is placed in a
reduction loop (``loop``) inside it or after it (``in_reduction_loop``), following the rules in
docs/kernel-backend.md. Size-1 dims are dropped from iteration spaces so that ``[N, 1]`` and ``[N]``
spaces match.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import sympy

from inductor_ir.backend import BufferRecord, KernelNode, NodeBody
from inductor_ir.ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternKernel,
    Pointwise,
    Reduction,
)
from inductor_ir.ir.tracing import MemoryDep, trace_body
from inductor_ir.scheduler.dim_maps import (
    DimMap,
    dim_maps,
    mapped_body,
    numel,
    simplified_deps,
    simplifying_body,
)
from inductor_ir.symbolic import FloorDiv, ModularIndexing, index_symbol

__all__ = ["Group", "Placement", "SchedulerNode", "buffer_record", "group_vars"]

Sizes = tuple[sympy.Expr, ...]



def buffer_record(buf: Buffer) -> BufferRecord:
    """The backend-facing record of a buffer."""
    layout = buf.layout
    return BufferRecord(buf.name, layout.dtype, layout.size, layout.stride, layout.offset, layout.device)


def group_vars(pw: Sizes, rd: Sizes) -> tuple[tuple[sympy.Symbol, ...], tuple[sympy.Symbol, ...]]:
    """Canonical index symbols of a group: ``x0..`` and ``r0..``."""
    return _canonical_vars(len(pw), len(rd))


@functools.lru_cache(maxsize=64)
def _canonical_vars(npw: int, nrd: int) -> tuple[tuple[sympy.Symbol, ...], tuple[sympy.Symbol, ...]]:
    xs = tuple(sympy.Symbol(f"x{i}", integer=True, nonnegative=True) for i in range(npw))
    rs = tuple(sympy.Symbol(f"r{i}", integer=True, nonnegative=True) for i in range(nrd))
    return xs, rs


def _squeeze(ranges: Sequence[sympy.Expr], keep_one: bool = False) -> tuple[Sizes, list[bool]]:
    keep = [r != 1 for r in ranges]
    if keep_one and ranges and not any(keep):
        keep[-1] = True  # a reduction over one element still has its (one-trip) reduction loop
    return tuple(r for r, k in zip(ranges, keep) if k), keep


def _expand_vars(keep: list[bool], variables: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    it = iter(variables)
    return [next(it) if k else sympy.Integer(0) for k in keep]


@dataclass(eq=False)
class SchedulerNode:
    """One buffer to compute: a ``ComputedBuffer`` (fusible) or an extern/fallback/multi-output call."""

    buffer: Buffer
    order: int
    reads: frozenset[str]
    mutates: bool = False
    # Symbols the body uses outside loads and stores (``ops.index_expr``), filled by `trace`.
    index_symbols: set[sympy.Symbol] = field(default_factory=set)
    _traces: dict[tuple[bool, int, int, DimMap | None, Sizes], tuple[list[MemoryDep], list[MemoryDep]]] = field(
        default_factory=dict, repr=False
    )
    _spaces: tuple[Sizes, Sizes] | None = field(default=None, repr=False)
    _record: BufferRecord | None = field(default=None, repr=False)
    _keep: tuple[list[bool], list[bool]] | None = field(default=None, repr=False)
    _bodies: dict[tuple[bool, DimMap | None, Sizes], NodeBody] = field(default_factory=dict, repr=False)
    _kernel_nodes: dict[tuple[int, bool, DimMap | None, Sizes], KernelNode] = field(default_factory=dict, repr=False)

    @property
    def record(self) -> BufferRecord:
        """``buffer_record(self.buffer)`` (made once: every candidate group asks for it)."""
        if self._record is None:
            self._record = buffer_record(self.buffer)
        return self._record

    def trace(
        self,
        in_loop: bool,
        xs: Sequence[sympy.Symbol],
        rs: Sequence[sympy.Symbol],
        dim_map: DimMap | None = None,
        sizes: Sizes = (),
    ) -> tuple[list[MemoryDep], list[MemoryDep]]:
        """(reads, writes) of the body over a group's canonical variables (cached).

        ``sizes`` (the ranges of ``xs`` then ``rs``) simplify indices with ``//`` and ``%`` (views of
        reshaped buffers) so that equal accesses compare equal.
        """
        key = (in_loop, len(xs), len(rs), dim_map, sizes)
        if key not in self._traces:
            renamed = self._renamed_trace(in_loop, xs, rs) if dim_map is None else None
            if renamed is not None:
                self._traces[key] = renamed
                return renamed
            handler = trace_body(self.body_for(in_loop, dim_map, sizes), xs, rs if in_loop else (), text=False)
            reads, writes = handler.deps.reads, handler.deps.writes
            if sizes:
                ranges = list(zip((*xs, *rs), sizes))
                reads, writes = simplified_deps(reads, ranges), simplified_deps(writes, ranges)
            self._traces[key] = (reads, writes)
            self.index_symbols |= handler.deps.index_symbols
        return self._traces[key]

    def _renamed_trace(
        self, in_loop: bool, xs: Sequence[sympy.Symbol], rs: Sequence[sympy.Symbol]
    ) -> tuple[list[MemoryDep], list[MemoryDep]] | None:
        """What tracing ``body_for(in_loop)`` gives, from the lowering's trace of the buffer's
        body by renaming its index symbols, or None where renaming might not give exactly that.

        Only polynomial loads qualify: substituting the group's variables (or 0 for a squeezed dim)
        into a sum of products builds the same expression as computing it with them. ``//``, ``%``
        (simplified over the group's ranges when traced), ``ops.index_expr`` and indirect loads are
        traced again.
        """
        buf = self.buffer
        traced = getattr(buf, "traced", None)
        if traced is None or traced.index_symbols or not isinstance(buf, ComputedBuffer):
            return None
        keep, rkeep = self._keeps()
        if isinstance(buf.data, Pointwise):
            index = _expand_vars(keep, list(xs) + list(rs) if in_loop else list(xs)[: sum(keep)])
            rindex: list[sympy.Expr] = []
        else:
            index, rindex = _expand_vars(keep, xs), _expand_vars(rkeep, rs)
        mapping: dict[sympy.Basic, sympy.Expr] = {index_symbol("i", k): v for k, v in enumerate(index)}
        mapping.update((index_symbol("r", k), v) for k, v in enumerate(rindex))
        reads = []
        for dep in traced.reads:
            expr = dep.index
            if not isinstance(expr, sympy.Expr) or expr.has(FloorDiv, ModularIndexing):
                return None
            if any(getattr(s, "name", "").startswith("indirect") for s in expr.free_symbols):
                return None
            reads.append(MemoryDep(dep.name, expr.xreplace(mapping)))
        return reads, [MemoryDep(buf.name, buf.layout.index(index))]

    @property
    def name(self) -> str:
        """The buffer's name."""
        return self.buffer.name

    @property
    def is_fusible(self) -> bool:
        """Whether it is a ``ComputedBuffer``."""
        return isinstance(self.buffer, ComputedBuffer)

    @property
    def is_reduction(self) -> bool:
        """Whether it computes a reduction."""
        return isinstance(self.buffer, ComputedBuffer) and self.buffer.is_reduction

    def spaces(self) -> tuple[Sizes, Sizes]:
        """Squeezed ``(ranges, reduction_ranges)``."""
        if self._spaces is None:
            buf = self.buffer
            assert isinstance(buf, ComputedBuffer)
            pw, _ = _squeeze(buf.data.ranges)
            rd = _squeeze(buf.data.reduction_ranges, keep_one=True)[0] if buf.is_reduction else ()  # type: ignore[union-attr]
            self._spaces = (pw, rd)
        return self._spaces

    def body_for(self, in_loop: bool, dim_map: DimMap | None = None, sizes: Sizes = ()) -> NodeBody:
        """The node's body over a group's canonical variables (in or after the reduction loop).

        ``dim_map`` (pointwise nodes only) says how the node's dims sit in the group's space when
        they differ from it (see ``dim_maps.py``); ``sizes`` are that space's ranges.
        """
        key = (in_loop, dim_map, sizes)
        body = self._bodies.get(key)
        if body is None:
            body = self._bodies[key] = self._make_body(in_loop, dim_map, sizes)
        return body

    def kernel_node(self, loop: int, in_loop: bool, dim_map: DimMap | None, sizes: Sizes) -> KernelNode:
        """The backend-facing record of the node placed in reduction loop ``loop`` (made once per placement)."""
        key = (loop, in_loop, dim_map, sizes)
        found = self._kernel_nodes.get(key)
        if found is None:
            buf = self.buffer
            data = buf.data if isinstance(buf, ComputedBuffer) else None
            found = KernelNode(
                self.record,
                self.body_for(in_loop, dim_map, sizes),
                "reduction" if self.is_reduction else "pointwise",
                loop,
                in_loop,
                data.reduction_type if isinstance(data, Reduction) else None,
                self.origins(),
            )
            self._kernel_nodes[key] = found
        return found

    def _make_body(self, in_loop: bool, dim_map: DimMap | None, sizes: Sizes) -> NodeBody:
        buf = self.buffer
        assert isinstance(buf, ComputedBuffer)
        data = buf.data
        keep, rkeep = self._keeps()
        if isinstance(data, Pointwise):
            npw = sum(keep)

            def pointwise_body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
                variables = list(xs) + list(rs) if in_loop else list(xs)[:npw]
                buf.store_pointwise(_expand_vars(keep, variables))

            if dim_map is not None:
                return mapped_body(lambda variables: buf.store_pointwise(_expand_vars(keep, variables)), dim_map, sizes, in_loop)
            return simplifying_body(pointwise_body, sizes) if sizes else pointwise_body

        def reduction_body(xs: Sequence[sympy.Expr], rs: Sequence[sympy.Expr]) -> None:
            buf.store_reduction(_expand_vars(keep, xs), _expand_vars(rkeep, rs))

        return simplifying_body(reduction_body, sizes) if sizes else reduction_body

    def _keeps(self) -> tuple[list[bool], list[bool]]:
        """Which dims of the ranges and reduction ranges are kept by ``_squeeze``."""
        if self._keep is None:
            data = self.buffer.data  # type: ignore[attr-defined]
            rkeep = _squeeze(data.reduction_ranges, keep_one=True)[1] if isinstance(data, Reduction) else []
            self._keep = (_squeeze(data.ranges)[1], rkeep)
        return self._keep

    def kind(self) -> str:
        """``reduction`` or ``pointwise``."""
        return "reduction" if self.is_reduction else "pointwise"

    def origins(self) -> tuple[str, ...]:
        """ATen op names it came from."""
        buf = self.buffer
        if isinstance(buf, ComputedBuffer):
            return buf.data.origins
        if isinstance(buf, ExternKernel):
            return (str(getattr(buf.op, "__name__", buf.op)).split(".")[0],)
        return ()


@dataclass
class Placement:
    """Where a node runs in its group, and its loads/stores over the group's variables."""

    node: SchedulerNode
    loop: int
    in_loop: bool
    reads: list[MemoryDep]
    writes: list[MemoryDep]
    dim_map: DimMap | None = None


@dataclass(eq=False)
class Group:
    """A set of scheduler nodes that will become one kernel (or one extern call)."""

    nodes: list[SchedulerNode]
    pointwise_size: Sizes = ()
    reduction_size: Sizes = ()
    placements: list[Placement] = field(default_factory=list)
    _names: set[str] | None = field(default=None, repr=False)
    _order: int | None = field(default=None, repr=False)
    _reads: set[str] | None = field(default=None, repr=False)

    @property
    def is_extern(self) -> bool:
        """A group holding one non-fusible node."""
        return not self.nodes[0].is_fusible

    @property
    def device(self) -> str:
        """The device of its buffers."""
        return self.nodes[0].buffer.device

    @property
    def order(self) -> int:
        """Position of its first node in the program."""
        if self._order is None:
            self._order = min(n.order for n in self.nodes)
        return self._order

    def names(self) -> set[str]:
        """Buffers written by the group."""
        if self._names is None:
            self._names = {n.name for n in self.nodes}
        return self._names

    def reads(self) -> set[str]:
        """Buffers read from outside the group."""
        if self._reads is None:
            written = self.names()
            self._reads = {r for n in self.nodes for r in n.reads if r not in written}
        return self._reads

    def reloaded(self) -> set[str]:
        """Buffers an in-loop pointwise node computes that a node of a later loop reads: stored by the
        kernel and loaded back from memory (never kept in registers only)."""
        loops = {p.node.name: p.loop for p in self.placements if p.in_loop and not p.node.is_reduction}
        return {
            dep.name
            for p in self.placements
            for dep in p.reads
            if dep.name in loops and p.loop > loops[dep.name]
        }

    @staticmethod
    def single(node: SchedulerNode) -> Group | None:
        """A group of one node; ``None`` when the node cannot be placed (never for a lone node)."""
        if not node.is_fusible:
            return Group([node])
        pw, rd = node.spaces()
        return place([node], pw, rd)


def _placement_options(node: SchedulerNode, pw: Sizes, rd: Sizes) -> tuple[tuple[bool, DimMap | None], ...]:
    """(in reduction loop, dim map) choices for ``node`` in the space ``(pw, rd)``, best first."""
    npw, nrd = node.spaces()
    return _options_for(npw, nrd, node.is_reduction, pw, rd)


@functools.lru_cache(maxsize=8192)
def _options_for(npw: Sizes, nrd: Sizes, is_reduction: bool, pw: Sizes, rd: Sizes) -> tuple[tuple[bool, DimMap | None], ...]:
    """:func:`_placement_options` of a node by its spaces (a pure function of sizes, memoized:
    fusion asks it for the same shapes over and over)."""
    if is_reduction:
        return ((True, None),) if (npw, nrd) == (pw, rd) else ()
    if rd and npw == pw + rd:
        return ((True, None),)
    if npw == pw:
        return ((False, None),)
    options: list[tuple[bool, DimMap | None]] = []
    if rd:
        options += [(True, m) for m in dim_maps(npw, pw + rd)]
    # A pointwise group only takes order-preserving maps (a finer split of the same loops): a
    # permuted order could turn its contiguous accesses into strided ones.
    options += [(False, m) for m in dim_maps(npw, pw, monotone=not rd)]
    return tuple(options)


def _check_reads(
    reads: list[MemoryDep], in_loop: bool, placed: dict[str, Placement], reload_stored: bool = False
) -> int | None:
    """The loop a node reading ``reads`` runs in, or None when it reads a group value it cannot see.

    A value an in-loop pointwise node computes is read in registers in its own loop. With
    ``reload_stored`` (a backend whose generated code may load back, in a later loop, a row it stored
    in an earlier one) an in-loop reader may also run in a later loop: the value is then stored and
    loaded again (`Group.reloaded`)."""
    loop = 0
    pinned: set[int] = set()
    for dep in reads:
        producer = placed.get(dep.name)
        if producer is None:
            continue
        if dep.index != producer.writes[0].index:
            return None  # reads a value of this group at another element: not in registers
        if producer.node.is_reduction:
            loop = max(loop, producer.loop + (1 if in_loop else 0))
        elif producer.in_loop:
            if not in_loop:
                return None
            pinned.add(producer.loop)
        else:
            loop = max(loop, producer.loop + (1 if in_loop else 0))
    if not pinned:
        return loop
    latest = max(pinned)
    if reload_stored:
        return max(loop, latest)
    if len(pinned) > 1 or loop > latest:
        return None
    return latest


def place(nodes: Sequence[SchedulerNode], pw: Sizes, rd: Sizes, reload_stored: bool = False) -> Group | None:
    """Place ``nodes`` (program order) in the space ``(pw, rd)``; ``None`` when the rules forbid it.

    ``reload_stored``: in-loop values may be read in later loops, stored and loaded back (see
    `_check_reads`); only for backends that say they generate that (`reloads_stored_rows`)."""
    xs, rs = group_vars(pw, rd)
    placed: dict[str, Placement] = {}
    result: list[Placement] = []
    ordered = sorted(nodes, key=lambda n: n.order)
    reference: set[MemoryDep] | None = None
    long_rows = _few_long_rows(pw, rd)
    # A kernel of several loops runs each row on one thread: few long rows keep their loops apart.
    reload_stored = reload_stored and not long_rows
    for node in ordered:
        options = _placement_options(node, pw, rd)
        if len(options) > 1 and reference is None:
            reference = _reference_deps(ordered, pw, rd, xs, rs)
        best: tuple[int, Placement] | None = None
        for in_loop, dim_map in options:
            reads, writes = node.trace(in_loop, xs, rs, dim_map, pw + rd if in_loop else pw)
            loop = _check_reads(reads, in_loop, placed, reload_stored)
            if loop is None or (long_rows and in_loop and dim_map is not None and loop > 0):
                # A long reduction to few outputs must stay one loop, so that code generators can
                # split it across many programs; a remapped node would add a second one.
                continue
            placement = Placement(node, loop, in_loop, reads, writes, dim_map)
            if len(options) == 1:
                best = (0, placement)
                break
            assert reference is not None
            score = sum(1 for dep in (*reads, *writes) if dep in reference)
            if best is None or score > best[0]:
                best = (score, placement)
        if best is None:
            return None
        placed[node.name] = best[1]
        result.append(best[1])
    result.sort(key=lambda p: (p.loop, not p.in_loop, p.node.order))
    return Group(ordered, pw, rd, result)


_FEW_OUTPUTS = 1024
_LONG_ROWS = 8192


def _few_long_rows(pw: Sizes, rd: Sizes) -> bool:
    """Whether ``(pw, rd)`` is a long reduction to few outputs (static sizes only)."""
    outputs, rows = numel(pw), numel(rd)
    return bool(rd) and outputs.is_Integer and rows.is_Integer and outputs < _FEW_OUTPUTS and rows >= _LONG_ROWS


def _reference_deps(
    nodes: Sequence[SchedulerNode], pw: Sizes, rd: Sizes, xs: Sequence[sympy.Symbol], rs: Sequence[sympy.Symbol]
) -> set[MemoryDep]:
    """Loads and stores of the nodes that fit the space as they are: a mapped node should line up with them."""
    deps: set[MemoryDep] = set()
    for node in nodes:
        options = _placement_options(node, pw, rd)
        if len(options) == 1 and options[0][1] is None:
            reads, writes = node.trace(options[0][0], xs, rs, None, pw + rd if options[0][0] else pw)
            deps.update(reads)
            deps.update(writes)
    return deps


def merged_space(a: Group, b: Group) -> tuple[Sizes, Sizes] | None:
    """The iteration space two groups can share, if any."""
    if a.reduction_size and b.reduction_size:
        if (a.pointwise_size, a.reduction_size) == (b.pointwise_size, b.reduction_size):
            return a.pointwise_size, a.reduction_size
        return None
    if a.reduction_size or b.reduction_size:
        red, other = (a, b) if a.reduction_size else (b, a)
        pw, rd = red.pointwise_size, red.reduction_size
        if other.pointwise_size in (pw, pw + rd):
            return pw, rd
        count = numel(other.pointwise_size)
        if count == numel(pw + rd) or count == numel(pw):
            return pw, rd  # `place` finds how the other group's dims map onto these, if they can
        return None
    if a.pointwise_size == b.pointwise_size:
        return a.pointwise_size, ()
    if len(a.pointwise_size) != len(b.pointwise_size) and numel(a.pointwise_size) == numel(b.pointwise_size):
        finer = a if len(a.pointwise_size) > len(b.pointwise_size) else b
        return finer.pointwise_size, ()
    return None


def kernel_nodes(group: Group) -> tuple[KernelNode, ...]:
    """The backend-facing node records of a group."""
    full = group.pointwise_size + group.reduction_size
    return tuple(
        p.node.kernel_node(p.loop, p.in_loop, p.dim_map, full if p.in_loop else group.pointwise_size)
        for p in group.placements
    )
