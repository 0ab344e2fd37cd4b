"""Symbolic Python numbers: sizes of dynamic dims (SymInt), and what Python computes from them.

A `SymNodeVariable` is a value such as ``x.size(1)`` when dim 1 is dynamic: its FX node
(``x.size(1)``, ``mul``, ...) computes it inside the graph, and its example value is a ShapeEnv
`torch.SymInt` / `SymFloat` / `SymBool`. Arithmetic on it is traced (new nodes); a branch on it
(`truth`), or a use that needs a plain Python value (`as_constant`, e.g. ``range(n)``),
specializes it: the ShapeEnv records a guard on the sizes, which becomes a guard of the entry.
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import is_concrete_bool, is_concrete_float, is_concrete_int

from capture.variables.base import (
    ConstantVariable,
    Unsupported,
    VariableTracker,
    graph_constant,
    is_constant_value,
)

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph
    from capture.variables.tracer import Tracer

SymValue = torch.SymInt | torch.SymFloat | torch.SymBool
SYMBOLIC_NODE = "kiln_symbolic"
"""Meta key of graph nodes computing a Python number from sizes (removed when nothing uses them)."""


def is_symbolic(value: Any) -> bool:
    """True for a SymInt/SymFloat/SymBool whose value is not a known constant."""
    if isinstance(value, torch.SymInt):
        return not is_concrete_int(value)
    if isinstance(value, torch.SymFloat):
        return not is_concrete_float(value)
    if isinstance(value, torch.SymBool):
        return not is_concrete_bool(value)
    return False


def concrete(value: Any) -> Any:
    """A Sym value known to be constant as a plain Python number (no guard); others unchanged."""
    if isinstance(value, torch.SymInt) and is_concrete_int(value):
        return int(value)
    if isinstance(value, torch.SymFloat) and is_concrete_float(value):
        return float(value)
    if isinstance(value, torch.SymBool) and is_concrete_bool(value):
        return bool(value)
    return value


class SymNodeVariable(VariableTracker):
    """A symbolic int/float/bool computed from sizes: a graph node plus a ShapeEnv value."""

    def __init__(self, node: torch.fx.Node, value: SymValue) -> None:
        self.node = node
        self.value = value

    def python_type(self) -> type:
        if isinstance(self.value, torch.SymBool):
            return bool
        return float if isinstance(self.value, torch.SymFloat) else int

    def as_constant(self) -> Any:
        """Specialize: the value on this call, with a ShapeEnv guard that it stays so."""
        kind = self.python_type()
        return kind(self.value)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)  # guards the sizes the branch depends on

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        raise Unsupported(f"attribute {name!r} of a symbolic size")

    def __repr__(self) -> str:
        return f"SymNodeVariable({self.node.name}: {self.value})"


def wrap_symbolic(output: OutputGraph, node: torch.fx.Node, value: Any) -> VariableTracker:
    """`value` computed by `node`: a SymNodeVariable, or a constant (the node is then removed)."""
    value = concrete(value)
    if is_symbolic(value):
        node.meta["example_value"] = value
        node.meta[SYMBOLIC_NODE] = True
        return SymNodeVariable(node, value)
    if not node.users:
        output.graph.erase_node(node)
    return ConstantVariable(value)


def record(output: OutputGraph, fn: Any, args: list[VariableTracker]) -> VariableTracker:
    """`fn(*args)` on symbolic and constant numbers: a call_function node computing it."""
    node_args = tuple(a.node if isinstance(a, SymNodeVariable) else graph_constant(a.as_constant()) for a in args)
    values = [a.value if isinstance(a, SymNodeVariable) else a.as_constant() for a in args]
    try:
        value = fn(*values)
    except Exception as error:
        raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    node = output.graph.call_function(fn, node_args)
    return wrap_symbolic(output, node, value)


_SYM_BUILTINS: dict[Any, Any] = {
    builtins.abs: operator.abs,
    builtins.min: torch.sym_min,
    builtins.max: torch.sym_max,
    builtins.float: torch.sym_float,
    builtins.pow: operator.pow,
}

_SPECIALIZING_BUILTINS = {builtins.range, builtins.round, builtins.str, builtins.repr, builtins.format,
                          builtins.divmod, builtins.complex, builtins.chr, builtins.hex, builtins.oct, builtins.bin,
                          builtins.min, builtins.max, builtins.pow, builtins.abs, builtins.float, builtins.int,
                          builtins.bool}


def call_builtin(tx: Tracer, fn: Any, args: list[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """A builtin or `math` function applied to symbolic sizes; None when no argument is symbolic.

    ``int(n)`` keeps an int symbolic; ``float``, ``abs``, ``min``/``max`` of two values, ``pow``
    and ``math.sqrt`` are traced; anything else specializes the symbolic arguments (with guards).
    """
    if not any(isinstance(a, SymNodeVariable) for a in [*args, *kwargs.values()]):
        return None
    simple = not kwargs and all(isinstance(a, SymNodeVariable) or a.is_constant() for a in args)
    if simple and fn is builtins.int and len(args) == 1 and isinstance(args[0], SymNodeVariable):
        value = args[0].value
        return args[0] if isinstance(value, torch.SymInt) else record(tx.output, torch.sym_int, args)
    if simple and fn is builtins.bool and len(args) == 1:
        return ConstantVariable(args[0].truth(tx))
    if simple and fn is builtins.slice and 1 <= len(args) <= 3:
        return SymSliceVariable(list(args))  # `slice(i, i + n)` for indexing a tensor along a dynamic dim
    traced = _SYM_BUILTINS.get(fn)
    if simple and traced is not None and (len(args) == 2 or fn in (builtins.abs, builtins.float)):
        return record(tx.output, traced, args)
    if simple and fn is math.sqrt and len(args) == 1:
        return record(tx.output, operator.pow, [args[0], ConstantVariable(0.5)])
    if fn not in _SPECIALIZING_BUILTINS and getattr(fn, "__module__", None) != "math":
        return None  # isinstance, type, id, ...: the builtin's own handler knows what to do
    # range, str, round, math.floor, ...: run on the values, specialized (each with a guard).
    try:
        result = fn(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except Unsupported:
        raise
    except Exception as error:
        raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    if not is_constant_value(result):
        raise Unsupported(f"{getattr(fn, '__name__', fn)}() of a symbolic size returned a {type(result).__name__}")
    return ConstantVariable(result)


class SymSliceVariable(VariableTracker):
    """A slice whose bounds are symbolic sizes (``x[:, :n]``): traced into tensor indexing."""

    def __init__(self, parts: list[VariableTracker]) -> None:
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def as_constant(self) -> Any:
        """Specialize the bounds (indexing a Python list or tuple needs plain ints)."""
        return slice(*[part.as_constant() for part in self.parts])

    def unpack(self) -> tuple[slice, slice]:
        """(FX argument, example argument) of the slice."""
        nodes = [p.node if isinstance(p, SymNodeVariable) else p.as_constant() for p in self.parts]
        values = [p.value if isinstance(p, SymNodeVariable) else p.as_constant() for p in self.parts]
        return slice(*nodes), slice(*values)

    def __repr__(self) -> str:
        return f"SymSliceVariable({self.parts})"
