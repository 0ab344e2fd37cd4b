"""Producer/consumer edges between live groups, kept up to date as groups merge.

Fusion asks, for every candidate pair, whether merging it would create a cycle through a third
group. Rebuilding the edges after each merge costs a pass over every group's reads (quadratic on
graphs of thousands of nodes); :class:`GroupEdges` builds them once and rewires only the neighbours
of the two merged groups. It also keeps a topological order of the live groups, so that a search
for a path ``src -> ... -> dst`` only visits groups placed between the two.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from inductor_ir.scheduler.groups import Group

__all__ = ["GroupEdges"]


class GroupEdges:
    """Group id -> ids of the groups that read a buffer it writes (``consumers``), and the reverse.

    Invariants, after every :meth:`merge`: ``consumers``/``producers`` equal :meth:`from_scratch` of
    the live groups, and ``position`` is a topological order of them (every edge goes to a larger
    position).
    """

    def __init__(self, groups: Mapping[int, Group]) -> None:
        self.consumers, self.producers = self.from_scratch(groups)
        self.order: list[int | None] = _topological_order(groups, self.consumers, self.producers)
        self.position = {g: k for k, g in enumerate(self.order) if g is not None}

    @staticmethod
    def from_scratch(groups: Mapping[int, Group]) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
        """(consumers, producers) computed from the groups' reads and writes."""
        writer = {name: k for k, g in groups.items() for name in g.names()}
        consumers: dict[int, set[int]] = {k: set() for k in groups}
        producers: dict[int, set[int]] = {k: set() for k in groups}
        for k, g in groups.items():
            for name in g.reads():
                source = writer.get(name)
                if source is not None:
                    consumers[source].add(k)
                    producers[k].add(source)
        return consumers, producers

    def merge(self, i: int, j: int, merged: int) -> None:
        """Replace groups ``i`` and ``j`` by the group ``merged`` (their union).

        The pair must have no path through a third group (``reaches_via_other`` is False both ways).
        """
        self._reorder(i, j, merged)
        pair = {i, j}
        consumers = (self.consumers.pop(i) | self.consumers.pop(j)) - pair
        producers = (self.producers.pop(i) | self.producers.pop(j)) - pair
        self.consumers[merged] = consumers
        self.producers[merged] = producers
        for k in producers:
            self.consumers[k] -= pair
            self.consumers[k].add(merged)
        for k in consumers:
            self.producers[k] -= pair
            self.producers[k].add(merged)

    def _reorder(self, i: int, j: int, merged: int) -> None:
        """Put ``merged`` where the order stays topological: between the two groups' positions, after
        the groups there that do not depend on the earlier one, before those that do."""
        low, high = sorted((self.position.pop(i), self.position.pop(j)))
        first = self.order[low]
        between = [g for g in self.order[low + 1 : high] if g is not None]
        assert first is not None
        later = self._descendants_before(first, high)
        arranged: list[int | None] = [g for g in between if g not in later]
        arranged += [merged, *(g for g in between if g in later)]
        arranged += [None] * (high - low + 1 - len(arranged))  # positions after `high` stay put
        self.order[low : high + 1] = arranged
        for k, g in enumerate(arranged, start=low):
            if g is not None:
                self.position[g] = k

    def _descendants_before(self, src: int, limit: int) -> set[int]:
        """Groups reachable from ``src`` whose position is below ``limit``."""
        position = self.position
        stack = [n for n in self.consumers[src] if position.get(n, limit) < limit]
        seen = set(stack)
        while stack:
            for nxt in self.consumers[stack.pop()]:
                if nxt not in seen and position.get(nxt, limit) < limit:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    def reaches_via_other(self, src: int, dst: int) -> bool:
        """Whether a path src -> ... -> dst passes through at least one other group."""
        limit = self.position[dst]
        if self.position[src] > limit:
            return False  # everything src reaches comes after it in the topological order
        consumers, position = self.consumers, self.position
        stack = [n for n in consumers[src] if n != dst and position[n] < limit]
        seen = set(stack)
        while stack:
            for nxt in consumers[stack.pop()]:
                if nxt == dst:
                    return True
                if nxt not in seen and position[nxt] < limit:
                    seen.add(nxt)
                    stack.append(nxt)
        return False


def _topological_order(
    groups: Mapping[int, Group], consumers: Mapping[int, set[int]], producers: Mapping[int, set[int]]
) -> list[int | None]:
    """Group ids in a topological order, program order among the ready ones."""
    indegree = {k: len(producers[k]) for k in groups}
    ready = [(g.order, k) for k, g in groups.items() if indegree[k] == 0]
    heapq.heapify(ready)
    order: list[int | None] = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(k)
        for u in consumers[k]:
            indegree[u] -= 1
            if indegree[u] == 0:
                heapq.heappush(ready, (groups[u].order, u))
    assert len(order) == len(groups), "cycle among scheduler groups"
    return order
