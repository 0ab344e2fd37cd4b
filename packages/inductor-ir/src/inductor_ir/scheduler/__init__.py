"""`schedule(program, backends) -> Schedule`: fusion, order, memory plan.

Steps: one scheduler node per buffer; one group per node; greedy fusion (``fusion.py``); a
topological order of the groups; a ``KernelGroup`` record per fused group; the memory plan.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy

from inductor_ir.backend import RANDOM_OPS, BufferRecord, KernelBackend, KernelGroup, KernelNode
from inductor_ir.ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternKernel,
    FallbackKernel,
    InputBuffer,
    MultiOutput,
    ReinterpretView,
)
from inductor_ir.ir.program import Program
from inductor_ir.scheduler.contract import check_group
from inductor_ir.scheduler.fusion import fuse_groups
from inductor_ir.scheduler.groups import Group, SchedulerNode, buffer_record, group_vars, kernel_nodes
from inductor_ir.scheduler.memory import MemoryPlan, StepBuffers, plan_memory, with_in_place
from inductor_ir.scheduler.merge_dims import DimMerge, merged_body, plan_merges
from inductor_ir.unbacked import output_definers, symbol_definers

__all__ = ["ExternStep", "KernelStep", "Schedule", "schedule"]


@dataclass(frozen=True)
class KernelStep:
    """Run the kernel generated for ``group``."""

    group: KernelGroup


@dataclass(frozen=True)
class ExternStep:
    """Call an extern/fallback kernel, or pick one output of a multi-output call."""

    buffer: Buffer


@dataclass
class Schedule:
    """The ordered steps of a program, their kernel groups and the memory plan."""

    program: Program
    steps: list[KernelStep | ExternStep]
    memory: MemoryPlan
    backends: Mapping[str, KernelBackend] = field(default_factory=dict)

    @property
    def kernel_groups(self) -> list[KernelGroup]:
        """The groups of the kernel steps, in order."""
        return [s.group for s in self.steps if isinstance(s, KernelStep)]

    def check(self) -> None:
        """Verify the program's invariants (:meth:`Program.check`) and the schedule's; raises
        ``AssertionError`` naming the first broken one.

        Each step reads only inputs, constants and buffers that earlier steps wrote and the memory
        plan has not freed, nor given to another buffer; a reused memory is a dead buffer's (or, in
        place, one the step reads for the last time); every output is alive at the end. Each kernel
        group keeps the rules its backend relies on (`contract.check_group`).
        """
        self.program.check()
        assert len(self.memory.steps) == len(self.steps), "the memory plan has one entry per step"
        alive = {b.name for b in (*self.program.input_buffers(), *self.program.constant_buffers())}
        for step, memory in zip(self.steps, self.memory.steps):
            if isinstance(step, KernelStep):
                group = step.group
                backend = self.backends.get(group.device_type)
                check_group(group, bool(getattr(backend, "reloads_stored_rows", False)))
                what, writes = f"kernel {group.name}", [r.name for r in group.outputs]
                reads = [r.name for r in group.inputs] + [p.input.name for p in group.in_place]
            else:
                what, writes, reads = step.buffer.name, [step.buffer.name], list(step.buffer.read_names())
            for name in reads:
                assert name in alive, f"{what} reads {name}, which no earlier step wrote or which was freed"
            for allocation in memory.allocations:
                if allocation.reuse is None:
                    continue
                if allocation.in_place:
                    assert allocation.reuse in reads, f"{what} writes in place over {allocation.reuse}, not an input"
                    alive.discard(allocation.reuse)
                else:
                    assert allocation.reuse not in alive, f"{what} reuses the memory of {allocation.reuse}, still alive"
            alive.update(writes)
            alive.difference_update(memory.frees)
        for name in _output_names(self.program):
            assert name in alive, f"output {name} was never written or was freed"


def _output_names(program: Program) -> set[str]:
    names: set[str] = set()
    for out in program.outputs:
        if isinstance(out, ReinterpretView):
            names.add(out.data.name)
        elif isinstance(out, Buffer):
            names.add(out.name)
    return names


def _draws_random(buf: Buffer) -> bool:
    """Whether ``buf`` is an ATen call that advances torch's random generator."""
    return isinstance(buf, FallbackKernel) and buf.op in RANDOM_OPS


def _live_buffers(program: Program, definers: Mapping[str, set[str]] | None = None) -> set[str]:
    """Buffers an output depends on, plus calls that mutate their arguments or draw random numbers
    (as eager, an unused draw still advances the generator); dead code is dropped. A call whose
    result binds an unbacked symbol (``u0 = buf3.size(0)``) lives while a user of the symbol does."""
    definers = symbol_definers(program) if definers is None else definers
    live = _output_names(program) | output_definers(program)
    for buf in reversed(program.buffers):
        schema = getattr(getattr(buf, "op", None), "_schema", None)
        if buf.name in live or bool(getattr(schema, "is_mutable", False)) or _draws_random(buf):
            live.add(buf.name)
            live.update(buf.read_names())
            live.update(definers.get(buf.name, ()))
    return live


def _scheduler_nodes(program: Program, definers: Mapping[str, set[str]] | None = None) -> list[SchedulerNode]:
    definers = symbol_definers(program) if definers is None else definers
    nodes = []
    live = _live_buffers(program, definers)
    for order, buf in enumerate(program.buffers):
        if isinstance(buf, InputBuffer) or buf.name not in live:
            continue
        mutates = isinstance(buf, ExternKernel) and bool(getattr(getattr(buf.op, "_schema", None), "is_mutable", False))
        # Ordered after the calls binding the unbacked symbols it uses (fusion keeps that order too).
        reads = frozenset(buf.read_names()) | definers.get(buf.name, set())
        nodes.append(SchedulerNode(buf, order, reads, mutates))
    # Calls drawing from torch's random generator keep their order among themselves: each one
    # leaves the generator's state to the next, as in eager (bit-identical under fallback_random).
    previous: str | None = None
    for node in nodes:
        if _draws_random(node.buffer):
            if previous is not None:
                node.reads = node.reads | {previous}
            previous = node.name
    # Calls that mutate their arguments keep their place: they depend on everything before them
    # and everything after depends on them. Not one that writes only buffers no other node reads
    # (a large index_put writing into its own copy): nothing can observe its order.
    private = _mutating_private_copies(nodes)
    for k, node in enumerate(nodes):
        if node.mutates and node.name not in private:
            before = {n.name for n in nodes[:k]}
            node.reads = node.reads | before
            for later in nodes[k + 1 :]:
                later.reads = later.reads | {node.name}
    return nodes


def _mutating_private_copies(nodes: Sequence[SchedulerNode]) -> set[str]:
    """Mutating calls whose written arguments are computed buffers that no other node reads."""
    readers: dict[str, set[str]] = {}
    for node in nodes:
        for name in node.buffer.read_names():
            readers.setdefault(name, set()).add(node.name)
    private: set[str] = set()
    for node in nodes:
        buf = node.buffer
        if not node.mutates or not isinstance(buf, ExternKernel):
            continue
        arguments = buf.op._schema.arguments
        written = [
            buf.args[k] for k, a in enumerate(arguments[: len(buf.args)]) if a.alias_info is not None and a.alias_info.is_write
        ]
        kwargs_written = any(a.alias_info is not None and a.alias_info.is_write and a.name in buf.kwargs for a in arguments)
        if written and not kwargs_written and all(
            isinstance(w, ComputedBuffer) and readers.get(w.name) == {node.name} for w in written
        ):
            private.add(node.name)
    return private


def _topological(groups: list[Group]) -> list[Group]:
    writer = {name: k for k, g in enumerate(groups) for name in g.names()}
    indegree = [0] * len(groups)
    users: dict[int, set[int]] = {k: set() for k in range(len(groups))}
    for k, g in enumerate(groups):
        for name in g.reads():
            if name in writer and writer[name] != k and k not in users[writer[name]]:
                users[writer[name]].add(k)
                indegree[k] += 1
    ready = [(g.order, k) for k, g in enumerate(groups) if indegree[k] == 0]
    heapq.heapify(ready)
    result = []
    while ready:
        _, k = heapq.heappop(ready)
        result.append(groups[k])
        for u in users[k]:
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(ready, (groups[u].order, u))
    assert len(result) == len(groups), "cycle among fused groups"
    return result


class _GroupRecords:
    """Builds ``KernelGroup`` records; knows which buffers are needed outside each group."""

    def __init__(self, program: Program, nodes: list[SchedulerNode],
                 definers: Mapping[str, set[str]] | None = None) -> None:
        self.program = program
        definers = symbol_definers(program) if definers is None else definers
        # Reads that only order a node after the call binding an unbacked symbol: not kernel inputs.
        self.symbol_only = {node.name: definers[node.name] - set(node.buffer.read_names())
                            for node in nodes if node.name in definers}
        self.readers: dict[str, set[str]] = {}
        for node in nodes:
            for name in node.reads:
                self.readers.setdefault(name, set()).add(node.name)
        self.kept = _output_names(program)
        self.size_symbols = set(program.size_sources)
        self.count = 0
        self.merge_dims = True
        # Where each buffer comes in the program (graph inputs first), to order a group's inputs.
        self.positions: dict[str, int] = {}
        for k, buf in enumerate(program.buffers):
            self.positions.setdefault(buf.name, k)
        graph_inputs: dict[str, int] = {}
        for k, item in enumerate(program.graph_inputs):
            if isinstance(item, InputBuffer):
                graph_inputs.setdefault(item.name, k - 1_000_000)
        self.positions.update(graph_inputs)
        self.input_records: dict[str, BufferRecord] = {}

    def record(self, group: Group, name: str | None = None) -> KernelGroup:
        written = group.names()
        reloaded = group.reloaded()
        outputs, internal = [], []
        for p in group.placements:
            record = p.node.record
            if p.node.name in self.kept or p.node.name in reloaded or self.readers.get(p.node.name, set()) - written:
                outputs.append(record)
            else:
                internal.append(record)
        reads = group.reads()
        if self.symbol_only:
            reads = {n for n in reads if not all(n in self.symbol_only.get(p.node.name, ()) or
                                                 n not in p.node.reads for p in group.placements)}
        inputs = [self._input_record(n) for n in sorted(reads, key=self._position)]
        symbols = self._size_symbols(group, (*inputs, *outputs, *internal)) if self.size_symbols else set()
        origins = list(dict.fromkeys(o for p in group.placements for o in p.node.origins()))
        final = name is None
        if final:
            name = "fused_" + "_".join(origins[:4] or ["kernel"]) + f"_{self.count}"
            self.count += 1
        nodes = kernel_nodes(group)
        pointwise_size, reduction_size = group.pointwise_size, group.reduction_size
        if self.merge_dims and final:
            nodes, pointwise_size, reduction_size = _merge_dims(group, nodes)
        assert name is not None
        return KernelGroup(
            name=name,
            device=group.device,
            pointwise_size=pointwise_size,
            reduction_size=reduction_size,
            nodes=nodes,
            inputs=tuple(inputs),
            outputs=tuple(outputs),
            internal=tuple(internal),
            size_symbols=tuple(sorted(symbols & self.size_symbols, key=str)),
        )

    @staticmethod
    def _size_symbols(group: Group, records: Sequence[BufferRecord]) -> set[sympy.Symbol]:
        """Every symbol in the group's indices, iteration space and buffer layouts."""
        symbols: set[sympy.Symbol] = set()
        for p in group.placements:
            for dep in p.reads + p.writes:
                symbols |= dep.index.free_symbols
            symbols |= p.node.index_symbols
        for size in group.pointwise_size + group.reduction_size:
            symbols |= sympy.sympify(size).free_symbols
        for rec in records:
            for expr in (*rec.size, *rec.stride, rec.offset):
                symbols |= sympy.sympify(expr).free_symbols
        return symbols

    def _input_record(self, name: str) -> BufferRecord:
        found = self.input_records.get(name)
        if found is None:
            found = self.input_records[name] = buffer_record(self.program.buffer(name))
        return found

    def _position(self, name: str) -> int:
        return self.positions.get(name, 0)


def schedule(
    program: Program, backends: Mapping[str, KernelBackend] | None = None, *, fuse: bool = True, merge_dims: bool = True
) -> Schedule:
    """Fuse, order and plan memory for a lowered program.

    Args:
        program: from :func:`inductor_ir.lower`.
        backends: device type -> backend; asked ``can_fuse_*`` before each fusion.
        fuse: ``False`` gives one kernel per computed buffer (for debugging).
        merge_dims: collapse contiguous dims of each group's iteration space.
    """
    backends = dict(backends or {})
    definers = symbol_definers(program)
    nodes = _scheduler_nodes(program, definers)
    groups = [g for g in (Group.single(n) for n in nodes) if g is not None]
    records = _GroupRecords(program, nodes, definers)
    records.merge_dims = merge_dims
    if fuse:
        groups = fuse_groups(program, groups, backends, lambda g: records.record(g, name="candidate"))
    groups = _topological(groups)
    steps: list[KernelStep | ExternStep] = []
    uses: list[StepBuffers] = []
    for group in groups:
        if group.is_extern:
            steps.append(ExternStep(group.nodes[0].buffer))
            uses.append(StepBuffers(None, group.reads(), group.names()))
            continue
        kernel_group = records.record(group)
        steps.append(KernelStep(kernel_group))
        writes = {r.name for r in kernel_group.outputs}
        uses.append(StepBuffers(kernel_group, group.reads(), writes, _in_place_candidates(group)))
    memory = plan_memory(program, uses, kept=records.kept, no_reuse=_aliased_buffers(program))
    # Kernels learn which outputs take over an input's memory: one pointer for both.
    steps = [
        KernelStep(with_in_place(step.group, step_memory)) if isinstance(step, KernelStep) else step
        for step, step_memory in zip(steps, memory.steps)
    ]
    return Schedule(program, steps, memory, backends)


def _merge_dims(group: Group, nodes: tuple[KernelNode, ...]) -> tuple[tuple[KernelNode, ...], tuple[sympy.Expr, ...], tuple[sympy.Expr, ...]]:
    """Collapse runs of dims that every access indexes like one dim (see ``merge_dims.py``)."""
    xs, rs = group_vars(group.pointwise_size, group.reduction_size)
    deps = [dep for p in group.placements for dep in p.reads + p.writes]
    pw = DimMerge(group.pointwise_size, plan_merges(deps, xs, group.pointwise_size), "x")
    rd = DimMerge(group.reduction_size, plan_merges(deps, rs, group.reduction_size), "r")
    if pw.trivial and rd.trivial:
        return nodes, group.pointwise_size, group.reduction_size
    merged = tuple(dataclasses.replace(node, body=merged_body(node.body, pw, rd)) for node in nodes)
    return merged, pw.merged_sizes, rd.merged_sizes


def _in_place_candidates(group: Group) -> dict[str, set[str]]:
    """Output -> inputs of the group only ever loaded at that output's store index, and never after it.

    An output stored inside a reduction loop and read outside that loop takes no input's memory: a
    code generator may compute such a value again where it is read (Triton keeps values of a loop
    in registers), reloading an input its store has overwritten.
    """
    result: dict[str, set[str]] = {}
    loads: dict[str, list[tuple[int, object]]] = {}
    loops: dict[str, set[tuple[int, bool]]] = {}
    for position, p in enumerate(group.placements):
        for dep in p.reads:
            loads.setdefault(dep.name, []).append((position, dep.index))
            loops.setdefault(dep.name, set()).add((p.loop, p.in_loop))
    for position, p in enumerate(group.placements):
        if not p.writes or (p.in_loop and loops.get(p.node.name, set()) - {(p.loop, True)}):
            continue
        store = p.writes[0].index
        result[p.node.name] = {
            name for name, uses in loads.items() if all(index == store and at <= position for at, index in uses)
        }
    return result


def _aliased_buffers(program: Program) -> set[str]:
    """Buffers another tensor may alias: read by a call that returns a view, or multi-output results."""
    names: set[str] = set()
    for buf in program.buffers:
        if isinstance(buf, ExternKernel):
            returns = getattr(getattr(buf.op, "_schema", None), "returns", [])
            if buf.output_is_tuple or any(r.alias_info is not None for r in returns):
                names.update(buf.read_names())
                names.add(buf.name)
        if isinstance(buf, MultiOutput):
            names.add(buf.name)
        if isinstance(buf, ComputedBuffer):
            continue
    return names
