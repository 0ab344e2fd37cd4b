"""A handler that records ops calls: the IR's printed form and its memory dependencies.

``TracingHandler`` turns each ``ops.<name>(...)`` into a line ``tmpN = ops.<name>(...)`` and records
every load and store as a :class:`MemoryDep` (buffer name + SymPy index). Dependency analysis,
the IR printer and ``describe_group`` are all this handler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from inductor_ir.ops_handler import OP_NAMES, set_ops_handler

__all__ = ["MemoryDep", "ReadsWrites", "TracedValue", "TracingHandler", "trace_body"]


@dataclass(frozen=True)
class MemoryDep:
    """One load or store: the buffer and the element index (a SymPy expression)."""

    name: str
    index: sympy.Expr


@dataclass
class ReadsWrites:
    """Loads and stores of one body, plus the number of ops it ran."""

    reads: list[MemoryDep] = field(default_factory=list)
    writes: list[MemoryDep] = field(default_factory=list)
    op_count: int = 0
    # Symbols in index expressions that are not loads (``ops.index_expr(s0 * x0)``) and in the bounds of
    # indirect indices (``ops.indirect_indexing(x, s0)``): kernels take them too.
    index_symbols: set[sympy.Symbol] = field(default_factory=set)

    def read_names(self) -> tuple[str, ...]:
        """Distinct buffer names read, in first-read order."""
        return tuple(dict.fromkeys(dep.name for dep in self.reads))


class TracedValue:
    """A named value in a trace (prints as its name)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


def _fmt(value: Any) -> str:
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(_fmt(v) for v in value) + ")"
    return str(value)


class TracingHandler:
    """Records every ops call as a line of text and every load/store as a ``MemoryDep``."""

    def __init__(self, indent: str = "", text: bool = True) -> None:
        self.text = text
        self.lines: list[str] = []
        self.deps = ReadsWrites()
        self._indent = indent
        self._count = 0
        self._indirect = 0

    def _new(self, text: str | Callable[[], str]) -> TracedValue:
        value = TracedValue(f"tmp{self._count}")
        self._count += 1
        self.deps.op_count += 1
        if self.text:
            self.lines.append(f"{self._indent}{value.name} = {text() if callable(text) else text}")
        return value

    def load(self, name: str, index: sympy.Expr) -> TracedValue:
        """Record a read."""
        self.deps.reads.append(MemoryDep(name, index))
        return self._new(lambda: f"ops.load({name!r}, {index})")

    def store(self, name: str, index: sympy.Expr, value: Any, mode: str | None = None) -> None:
        """Record a write."""
        self.deps.writes.append(MemoryDep(name, index))
        if self.text:
            self.lines.append(f"{self._indent}ops.store({name!r}, {index}, {_fmt(value)})")

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        """Record a reduction's write."""
        self.deps.writes.append(MemoryDep(name, index))
        if self.text:
            self.lines.append(f"{self._indent}ops.store_reduction({name!r}, {index}, {_fmt(value)})")

    def indirect_indexing(self, x: Any, size: sympy.Expr, check: bool = True, wrap_neg: bool = True) -> sympy.Symbol:
        """A fresh symbol ``indirectN`` for the value ``x``; the symbols of ``size`` (the bound a
        kernel checks the value against) count as index symbols: kernels take them too, also where
        no load or store uses them (a gather into a zero gradient, whose size only bounds the check)."""
        symbol = sympy.Symbol(f"indirect{self._indirect}", integer=True)
        self._indirect += 1
        self.deps.index_symbols |= sympy.sympify(size).free_symbols
        if self.text:
            self.lines.append(f"{self._indent}{symbol} = ops.indirect_indexing({_fmt(x)}, {size})")
        return symbol

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: Any) -> Any:
        """Record a reduction; welford kinds give the tuple ``(tmpN[0], tmpN[1], tmpN[2])``."""
        result = self._new(lambda: f"ops.reduction({dtype}, {src_dtype}, {reduction_type!r}, {_fmt(value)})")
        if reduction_type in ("welford_reduce", "welford_combine"):
            return tuple(TracedValue(f"{result.name}[{k}]") for k in range(3))
        return result

    def masked(self, mask: Any, body: Callable[[], Any], other: bool | int | float) -> TracedValue:
        """Trace ``body`` inline, then the masked result."""
        if self.text:
            self.lines.append(f"{self._indent}# masked by {_fmt(mask)}:")
        inner = body()
        return self._new(lambda: f"ops.masked({_fmt(mask)}, {_fmt(inner)}, {other})")


def _generic(op_name: str) -> Callable[..., TracedValue]:
    def method(self: TracingHandler, *args: Any, **kwargs: Any) -> TracedValue:
        def text() -> str:
            parts = [_fmt(a) for a in args] + [f"{k}={_fmt(v)}" for k, v in kwargs.items()]
            return f"ops.{op_name}({', '.join(parts)})"

        for value in (*args, *kwargs.values()):
            if isinstance(value, sympy.Expr):
                self.deps.index_symbols |= value.free_symbols
        return self._new(text)

    method.__name__ = op_name
    method.__doc__ = f"Record ``ops.{op_name}``."
    return method


for _name in OP_NAMES:
    if not hasattr(TracingHandler, _name):
        setattr(TracingHandler, _name, _generic(_name))


def trace_body(body: Callable[..., Any], *args: Sequence[sympy.Expr], indent: str = "", text: bool = True) -> TracingHandler:
    """Run ``body(*args)`` under a fresh ``TracingHandler`` and return the handler (``text=False``: deps only)."""
    handler = TracingHandler(indent, text)
    with set_ops_handler(handler):
        result = body(*args)
    if result is not None and text:
        handler.lines.append(f"{indent}return {_fmt(result)}")
    return handler
