"""Maximum flow / minimum s-t cut on a small directed graph (Dinic's algorithm)."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable

INFINITE = 1 << 62


class FlowNetwork:
    """A directed graph with integer capacities, nodes named by any hashable.

    Example:
        >>> net = FlowNetwork()
        >>> net.add_edge("s", "a", 3); net.add_edge("a", "t", 2)
        >>> net.min_cut("s", "t")[0]
        2
    """

    def __init__(self) -> None:
        self._index: dict[Hashable, int] = {}
        self._names: list[Hashable] = []
        # Edge i and its residual twin i ^ 1 live side by side.
        self._to: list[int] = []
        self._cap: list[int] = []
        self._adjacent: list[list[int]] = []

    def _node(self, name: Hashable) -> int:
        if name not in self._index:
            self._index[name] = len(self._names)
            self._names.append(name)
            self._adjacent.append([])
        return self._index[name]

    def add_edge(self, tail: Hashable, head: Hashable, capacity: int) -> None:
        """Add the edge `tail -> head` with `capacity` (use `INFINITE` for an uncuttable one)."""
        u, v = self._node(tail), self._node(head)
        self._adjacent[u].append(len(self._to))
        self._to.append(v)
        self._cap.append(min(capacity, INFINITE))
        self._adjacent[v].append(len(self._to))
        self._to.append(u)
        self._cap.append(0)

    def _levels(self, s: int, t: int) -> list[int] | None:
        level = [-1] * len(self._names)
        level[s] = 0
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self._adjacent[u]:
                if self._cap[e] > 0 and level[self._to[e]] < 0:
                    level[self._to[e]] = level[u] + 1
                    queue.append(self._to[e])
        return level if level[t] >= 0 else None

    def _augment(self, s: int, t: int, level: list[int], cursor: list[int]) -> int:
        # Iterative DFS along the level graph; returns the flow pushed on one path.
        path: list[int] = []
        u = s
        while True:
            if u == t:
                pushed = min(self._cap[e] for e in path)
                for e in path:
                    self._cap[e] -= pushed
                    self._cap[e ^ 1] += pushed
                return pushed
            advanced = False
            while cursor[u] < len(self._adjacent[u]):
                e = self._adjacent[u][cursor[u]]
                v = self._to[e]
                if self._cap[e] > 0 and level[v] == level[u] + 1:
                    path.append(e)
                    u = v
                    advanced = True
                    break
                cursor[u] += 1
            if not advanced:
                if not path:
                    return 0
                level[u] = -1  # dead end: never come back here in this phase
                e = path.pop()
                u = self._to[e ^ 1]
                cursor[u] += 1

    def min_cut(self, source: Hashable, sink: Hashable) -> tuple[int, set[Hashable]]:
        """Run max-flow; return the cut's value and the names on the source side of a minimum cut."""
        s, t = self._node(source), self._node(sink)
        flow = 0
        while (level := self._levels(s, t)) is not None:
            cursor = [0] * len(self._names)
            while pushed := self._augment(s, t, level, cursor):
                flow = min(flow + pushed, INFINITE)
        reachable = {s}
        queue = deque([s])
        while queue:
            u = queue.popleft()
            for e in self._adjacent[u]:
                if self._cap[e] > 0 and self._to[e] not in reachable:
                    reachable.add(self._to[e])
                    queue.append(self._to[e])
        return flow, {self._names[i] for i in reachable}
