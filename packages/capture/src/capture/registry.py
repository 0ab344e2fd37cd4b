"""Functions the user marked with allow_in_graph / disallow_in_graph / disable.

This is process-wide state by nature (like `functools.lru_cache` on a function): the marks are
properties of the user's functions, not of one compilation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class CallableMarks:
    """Callables forced into the graph as single nodes, or forced out of it (graph break)."""

    allowed: dict[int, Any] = field(default_factory=dict)
    disallowed: dict[int, Any] = field(default_factory=dict)

    def allow(self, fn: Any) -> None:
        """Record `fn` as a single graph node."""
        self.disallowed.pop(id(fn), None)
        self.allowed[id(fn)] = fn

    def disallow(self, fn: Any) -> None:
        """Record `fn` as a graph break."""
        self.allowed.pop(id(fn), None)
        self.disallowed[id(fn)] = fn

    def is_allowed(self, fn: Any) -> bool:
        """True when `fn` was passed to allow_in_graph."""
        return self.allowed.get(id(fn)) is fn

    def is_disallowed(self, fn: Any) -> bool:
        """True when `fn` was passed to disallow_in_graph."""
        return self.disallowed.get(id(fn)) is fn


MARKS = CallableMarks()
