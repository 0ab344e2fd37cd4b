"""Greedy fusion: merge the pair of groups that saves the most memory traffic, while legal.

Legal means: same device, both fusible, a shared iteration space (``merged_space``), the placement
rules hold (``place``), the merge creates no cycle through a third group, and the backend agrees.
The score of a pair is the bytes of the buffers they share (one writes, the other reads; or both
read). Tiny pointwise groups of one shape are also candidates, with score 0 (horizontal fusion of
independent small kernels saves launches).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy

from inductor_ir.backend import KernelBackend, KernelGroup
from inductor_ir.ir.program import Program
from inductor_ir.scheduler.group_edges import GroupEdges
from inductor_ir.scheduler.groups import Group, group_vars, merged_space, place

__all__ = ["fuse_groups"]

ToKernelGroup = Callable[[Group], KernelGroup]


_TINY_NUMEL = 1024


def _is_tiny(group: Group) -> bool:
    """A pointwise group of at most ``_TINY_NUMEL`` elements (static sizes)."""
    if group.reduction_size:
        return False
    numel = sympy.Mul(*group.pointwise_size) if group.pointwise_size else sympy.Integer(1)
    return bool(numel.is_Integer and int(numel) <= _TINY_NUMEL)


def _score(program: Program, a: Group, b: Group, sizes: dict[str, int]) -> int:
    shared = (a.names() & b.reads()) | (b.names() & a.reads()) | (a.reads() & b.reads())
    total = 0
    for name in shared:
        if name not in sizes:
            try:
                buf = program.buffer(name)
                sizes[name] = program.hint(buf.layout.numel()) * buf.layout.dtype.itemsize
            except (KeyError, TypeError, ValueError):
                sizes[name] = 1
        total += sizes[name]
    return total


def fuse_groups(
    program: Program,
    groups: list[Group],
    backends: Mapping[str, KernelBackend],
    to_kernel_group: ToKernelGroup,
    max_group_nodes: int = 64,
) -> list[Group]:
    """Merge groups greedily by score until no legal merge is left; returns the new list.

    Each round ranks every pair of groups that share a buffer once, then walks the ranking,
    merging each still-unmerged legal pair; rounds repeat until one merges nothing.
    """
    live: dict[int, Group] = dict(enumerate(groups))
    next_id = len(live)
    rejected: set[tuple[int, int]] = set()
    sizes: dict[str, int] = {}
    edges = GroupEdges(live)
    # A group's record is asked for in every candidate pair it is part of; groups never change.
    records: dict[Group, KernelGroup] = {}

    def record(group: Group) -> KernelGroup:
        if group not in records:
            records[group] = to_kernel_group(group)
        return records[group]

    while True:
        by_buffer: dict[object, list[int]] = {}
        for k, g in live.items():
            if not g.is_extern:
                for name in g.names() | g.reads():
                    by_buffer.setdefault(name, []).append(k)
                if _is_tiny(g):
                    # Tiny kernels of one shape (e.g. every BatchNorm's `num_batches_tracked + 1`)
                    # share nothing, but one launch beats many: they may fuse side by side.
                    by_buffer.setdefault(("tiny", g.pointwise_size), []).append(k)
        candidates = {(i, j) for members in by_buffer.values() for i in members for j in members if i < j}
        candidates -= rejected
        ranked = sorted(
            candidates,
            key=lambda p: (-_score(program, live[p[0]], live[p[1]], sizes), abs(live[p[0]].order - live[p[1]].order), p),
        )
        merged = False
        for i, j in ranked:
            if i not in live or j not in live:
                continue
            fused = _try_merge(live[i], live[j], edges, i, j, backends, record, max_group_nodes)
            if fused is None:
                rejected.add((i, j))
                continue
            del live[i], live[j]
            live[next_id] = fused
            edges.merge(i, j, next_id)
            next_id += 1
            merged = True
        if not merged:
            return sorted(live.values(), key=lambda g: g.order)


def reduction_walks(group: Group) -> frozenset[str]:
    """How the loads and stores inside a group's reduction loop walk memory: "inner" for an access
    contiguous along the innermost reduction variable (a row sum), "outer" for one contiguous along
    the innermost output variable and strided along the reduction (a column sum: a bias or norm
    weight's gradient over tokens). Accesses that do not depend on the outputs' variables walk no way."""
    if not group.reduction_size or not group.pointwise_size:
        return frozenset()
    xs, rs = group_vars(group.pointwise_size, group.reduction_size)
    walks: set[str] = set()
    for placement in group.placements:
        if not placement.in_loop:
            continue
        for dep in (*placement.reads, *placement.writes):
            if not dep.index.free_symbols & set(xs):
                continue  # a vector along the reduction (a row's statistic): read the same either way
            along_r = sympy.diff(dep.index, rs[-1])
            if along_r == 1:
                walks.add("inner")
            elif along_r != 0 and sympy.diff(dep.index, xs[-1]) == 1:
                walks.add("outer")
    return frozenset(walks)


def _crosses_walks(fused: Group, a: Group, b: Group) -> bool:
    """A merge whose reduction loop would walk memory both along and across its rows where neither
    part did: groups sharing an iteration space only by coincidence of sizes (a square `tokens x
    hidden` tensor reduced along rows in one, along columns in the other). Fused, one of them reads
    or writes across its tiles (uncoalesced on a GPU, strided on a CPU) for the whole range."""
    if not set(fused.pointwise_size) & set(fused.reduction_size):
        return False  # no output dim as long as a reduction dim: rows and columns cannot be confused
    if len(reduction_walks(fused)) < 2:
        return False
    return len(reduction_walks(a)) < 2 and len(reduction_walks(b)) < 2


def _try_merge(
    a: Group,
    b: Group,
    edges: GroupEdges,
    i: int,
    j: int,
    backends: Mapping[str, KernelBackend],
    to_kernel_group: ToKernelGroup,
    max_group_nodes: int,
) -> Group | None:
    if a.device != b.device or len(a.nodes) + len(b.nodes) > max_group_nodes:
        return None
    if edges.reaches_via_other(i, j) or edges.reaches_via_other(j, i):
        return None
    space = merged_space(a, b)
    if space is None:
        return None
    backend = backends.get(a.device.split(":")[0])
    fused = place(a.nodes + b.nodes, *space, reload_stored=bool(getattr(backend, "reloads_stored_rows", False)))
    if fused is None or _crosses_walks(fused, a, b):
        return None
    if backend is not None:
        first, second = (a, b) if a.order <= b.order else (b, a)
        vertical = bool(first.names() & second.reads())
        ka, kb = to_kernel_group(first), to_kernel_group(second)
        allowed = backend.can_fuse_vertical(ka, kb) if vertical else backend.can_fuse_horizontal(ka, kb)
        if not allowed:
            return None
    return fused
