"""Memory planning: buffer lifetimes, frees after last use, reuse of dead buffers of the same layout.

For each step the plan lists the buffers the wrapper allocates before it (each either fresh or
reusing a dead buffer's memory, possibly in place: an input of the same kernel that dies there) and
the buffers it frees after it. A kernel's in-place reuse is recorded in its ``KernelGroup``
(:func:`with_in_place`), so that the wrapper passes such an input and output as one argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from inductor_ir.backend import BufferRecord, InPlaceBuffer, KernelGroup
from inductor_ir.ir.program import Program

__all__ = ["Allocation", "MemoryPlan", "StepMemory", "plan_memory", "with_in_place"]


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
    steps: Sequence[KernelGroup | str],
    step_reads: Sequence[set[str]],
    step_writes: Sequence[set[str]],
    kept: set[str],
    no_reuse: set[str],
    in_place_ok: Sequence[dict[str, set[str]]],
) -> MemoryPlan:
    """Plan allocations and frees.

    Args:
        steps: per step a ``KernelGroup`` (its outputs are allocated by the wrapper) or the name of
            an extern/fallback result (allocated by the op itself).
        step_reads / step_writes: buffer names each step reads / produces.
        kept: buffers never freed (graph outputs and what they view).
        no_reuse: buffers whose memory may be aliased by another tensor (never reused).
        in_place_ok: per step, output name -> inputs whose every load uses that output's store index.
    """
    last_use: dict[str, int] = {}
    for k, reads in enumerate(step_reads):
        for name in reads:
            last_use[name] = k
    for k, writes in enumerate(step_writes):
        for name in writes:
            last_use.setdefault(name, k)
    inputs = {b.name for b in program.input_buffers()} | set(program.constants)
    pool: dict[tuple[object, ...], list[str]] = {}
    plan = MemoryPlan([StepMemory() for _ in steps])
    for k, step in enumerate(steps):
        memory = plan.steps[k]
        dying_here = [n for n in step_reads[k] if last_use.get(n) == k and n not in kept and n not in inputs]
        if isinstance(step, KernelGroup):
            taken: set[str] = set()
            for record in step.outputs:
                reuse, in_place = None, False
                for candidate in in_place_ok[k].get(record.name, set()):
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
        dying += [n for n in step_writes[k] if last_use.get(n) == k and n not in kept and n not in step_reads[k]]
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
        raise AssertionError(f"kernel {group.name}: in-place reuse of {sorted(missing)}, which it does not read")
    return dataclasses.replace(
        group,
        inputs=tuple(r for r in group.inputs if r.name not in over),
        in_place=tuple(InPlaceBuffer(found[name], output) for name, output in over.items()),
    )
