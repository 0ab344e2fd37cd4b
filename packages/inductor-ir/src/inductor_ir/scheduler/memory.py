"""Memory planning: buffer lifetimes, frees after last use, reuse of dead buffers of the same layout.

For each step the plan lists the buffers the wrapper allocates before it (each either fresh or
reusing a dead buffer's memory, possibly in place: an input of the same kernel that dies there) and
the buffers it frees after it. A kernel's in-place reuse is recorded in its ``KernelGroup``
(:func:`with_in_place`), so that the wrapper passes such an input and output as one argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from inductor_ir.backend import BufferRecord, InPlaceBuffer, KernelGroup
from inductor_ir.ir.program import Program

__all__ = ["Allocation", "MemoryPlan", "StepBuffers", "StepMemory", "plan_memory", "with_in_place"]


@dataclass(frozen=True)
class StepBuffers:
    """The buffers one step of the schedule uses, as the memory plan sees them.

    kernel: the step's ``KernelGroup`` (the wrapper allocates its outputs), or None for an
        extern/fallback call (the op allocates its result) or a pick of one of its outputs.
    reads / writes: names of the buffers the step reads / produces.
    in_place_ok: output name -> inputs every load of which uses that output's store index (so the
        output may take over such an input's memory when the input dies here).
    """

    kernel: KernelGroup | None
    reads: Set[str]
    writes: Set[str]
    in_place_ok: Mapping[str, Set[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Allocation:
    """A buffer the wrapper creates before a step: fresh (``reuse is None``) or in a dead buffer's memory."""

    record: BufferRecord
    reuse: str | None = None
    in_place: bool = False


@dataclass
class StepMemory:
    """Allocations before and frees after one step."""

    allocations: list[Allocation] = field(default_factory=list)
    frees: list[str] = field(default_factory=list)


@dataclass
class MemoryPlan:
    """One ``StepMemory`` per step, plus counts for reporting."""

    steps: list[StepMemory]

    @property
    def fresh_allocations(self) -> int:
        """Allocations that create new memory."""
        return sum(1 for s in self.steps for a in s.allocations if a.reuse is None)

    @property
    def reused_allocations(self) -> int:
        """Allocations served from a dead buffer."""
        return sum(1 for s in self.steps for a in s.allocations if a.reuse is not None)


def _key(record: BufferRecord) -> tuple[object, ...]:
    return (record.device, record.dtype, record.size, record.stride, record.offset)


def plan_memory(
    program: Program,
    steps: Sequence[StepBuffers],
    *,
    kept: Set[str],
    no_reuse: Set[str],
) -> MemoryPlan:
    """Plan allocations and frees.

    Args:
        program: the program scheduled. Its constants are never freed, and its inputs never reused;
            an input is released (the wrapper drops its name) after its last use, or at once when no
            step reads it, so that a caller passing its inputs boxed (a backward's saved activations,
            the list emptied) frees each one as soon as the graph is done with it, as eager autograd does.
        steps: what each step of the schedule reads, writes and may overwrite, in order.
        kept: buffers never freed (graph outputs and what they view).
        no_reuse: buffers whose memory may be aliased by another tensor (never reused).

    Returns:
        One ``StepMemory`` per step.
    """
    last_use: dict[str, int] = {}
    for k, step in enumerate(steps):
        for name in step.reads:
            last_use[name] = k
    for k, step in enumerate(steps):
        for name in step.writes:
            last_use.setdefault(name, k)
    released_inputs = {b.name for b in program.input_buffers()} - set(kept)
    inputs = released_inputs | set(program.constants)
    pool: dict[tuple[object, ...], list[str]] = {}
    plan = MemoryPlan([StepMemory() for _ in steps])
    for k, step in enumerate(steps):
        memory = plan.steps[k]
        dying_here = [n for n in step.reads if last_use.get(n) == k and n not in kept and n not in inputs]
        if step.kernel is not None:
            taken: set[str] = set()
            for record in step.kernel.outputs:
                reuse, in_place = None, False
                for candidate in step.in_place_ok.get(record.name, frozenset()):
                    if candidate in dying_here and candidate not in taken and candidate not in no_reuse:
                        if _key(program_record(program, candidate)) == _key(record):
                            reuse, in_place = candidate, True
                            break
                if reuse is None:
                    free_list = pool.get(_key(record))
                    if free_list:
                        reuse = free_list.pop()
                if reuse is not None:
                    taken.add(reuse)
                memory.allocations.append(Allocation(record, reuse, in_place))
            dying = [n for n in dying_here if n not in taken]
        else:
            dying = dying_here
        # Buffers written here and never read nor kept die at once.
        dying += [n for n in step.writes if last_use.get(n) == k and n not in kept and n not in step.reads]
        # An input dies like a buffer but its memory is the caller's: dropped here, never reused.
        unread = released_inputs - last_use.keys() if k == 0 else set()
        memory.frees.extend(
            sorted(unread) + sorted(n for n in step.reads if last_use.get(n) == k and n in released_inputs)
        )
        for name in dict.fromkeys(dying):
            memory.frees.append(name)
            if name in no_reuse:
                continue
            try:
                record = program_record(program, name)
            except KeyError:
                continue
            pool.setdefault(_key(record), []).append(name)
    return plan


def program_record(program: Program, name: str) -> BufferRecord:
    """The ``BufferRecord`` of a program buffer."""
    buf = program.buffer(name)
    layout = buf.layout
    return BufferRecord(name, layout.dtype, layout.size, layout.stride, layout.offset, layout.device)


def with_in_place(group: KernelGroup, memory: StepMemory) -> KernelGroup:
    """``group`` with the inputs its outputs take over in place moved from ``inputs`` to ``in_place``.

    Such an input and its output are then one kernel argument: two arguments naming one memory
    would break the kernels' no-alias promises (``__restrict__`` in C++), which compilers exploit.
    """
    over = {a.reuse: a.record.name for a in memory.allocations if a.in_place and a.reuse is not None}
    if not over:
        return group
    found = {r.name: r for r in group.inputs if r.name in over}
    missing = over.keys() - found.keys()
    if missing:
        raise AssertionError(
            f"kernel {group.name}: in-place reuse of {sorted(missing)}, which it does not read"
        )
    return dataclasses.replace(
        group,
        inputs=tuple(r for r in group.inputs if r.name not in over),
        in_place=tuple(InPlaceBuffer(found[name], output) for name, output in over.items()),
    )
