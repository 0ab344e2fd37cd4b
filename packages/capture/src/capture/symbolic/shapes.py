"""Dynamic shapes in capture: which dims are symbols, where each symbol is read from, and size guards.

Three pieces, all owned by one `OutputGraph`:

* `ShapePolicy` decides, per input tensor, which dims become ShapeEnv symbols: every dim under
  ``dynamic=True`` (for tensors reached from the frame's arguments), the dims named by
  `mark_dynamic`, and the dims automatic dynamic found changing between compiles
  (``dynamic=None``); never the dims named by `mark_static`, and never under ``dynamic=False``
  unless marked.
* `SymbolTable` maps each symbol to the Python expression that reads its value on a call
  (``L[0].size(1)``), renders any SymPy expression over symbols as Python, and remembers the user
  source line at which the ShapeEnv recorded each of its guards.
* `shape_guards` turns the ShapeEnv's guards (exactly the relations the trace relied on) into
  capture `Guard`s evaluated on every call against the real sizes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.printers import PythonPrinter

from capture.errors import UserLocation
from capture.sources import ItemSource, LocalSource, Source
from capture.symbolic.code_info import code_info, local_names

if TYPE_CHECKING:
    from capture.guards import GuardSet

log = logging.getLogger("capture")

MIN_SYMBOLIC_SIZE = 2
"""A dynamic dim is a symbol only for sizes >= 2: sizes 0 and 1 stay specialized (as torch's ShapeEnv does)."""


def new_shape_env(scalar_outputs: bool = False, dynamic_output_shape_ops: bool = False) -> ShapeEnv:
    """A ShapeEnv for capture.

    With `scalar_outputs`, `Tensor.item()` gives an unbacked SymInt/SymFloat (``u0``, ``zuf0``); with
    `dynamic_output_shape_ops`, `nonzero`, `masked_select`, `unique`, ... give tensors whose sizes are
    unbacked symbols. No input provides their values, so they are never guarded on: a Python branch
    on one raises GuardOnDataDependentSymNode, which capture turns into a graph break. Without the
    flags those ops raise on fake tensors, which is a graph break at the op.
    """
    return ShapeEnv(allow_scalar_outputs=scalar_outputs, allow_dynamic_output_shape_ops=dynamic_output_shape_ops)


@dataclass
class AutomaticDynamic:
    """Per code object: the sizes each input had when compiled, and the dims seen changing.

    `record` is called for every input tensor of every compile; a dim whose size differs from the
    one recorded by an earlier compile becomes dynamic for all later compiles of that code.
    """

    sizes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dynamic: dict[str, set[int]] = field(default_factory=dict)

    def record(self, key: str, shape: tuple[int, ...]) -> set[int]:
        """Remember `shape` for input `key`; return the dims known to change."""
        previous = self.sizes.get(key)
        changing = self.dynamic.setdefault(key, set())
        if previous is not None and len(previous) == len(shape):
            new = {d for d, (a, b) in enumerate(zip(previous, shape)) if a != b} - changing
            if new:
                log.info("capture: automatic dynamic: the size of %s in dim(s) %s changed (%s -> %s); "
                         "compiling those dims as symbols", key, sorted(new), list(previous), list(shape))
                changing.update(new)
        self.sizes[key] = shape
        return changing


@dataclass
class ShapePolicy:
    """What `optimize(dynamic=...)` and the marks decide for one compile.

    Attributes:
        dynamic: True (symbolic sizes for argument tensors), False (static; marks still count) or
            None (static first, then automatic dynamic).
        automatic: the code object's automatic-dynamic record (None: not tracked, e.g. export).
    """

    dynamic: bool | None = None
    automatic: AutomaticDynamic | None = None

    def dynamic_dims(self, value: torch.Tensor, source: Source) -> set[int]:
        """The dims of input `value` (read through `source`) that become symbols."""
        dims: set[int] = set(getattr(value, "_kiln_dynamic_dims", ()))
        if self.dynamic is True and _reached_from_arguments(source):
            dims.update(range(value.dim()))
        if self.dynamic is None and self.automatic is not None:
            dims |= self.automatic.record(source.expr(), tuple(value.shape))
        dims -= set(getattr(value, "_kiln_static_dims", ()))
        return {d for d in dims if 0 <= d < value.dim()}


def _reached_from_arguments(source: Source) -> bool:
    """True for the frame's arguments and items of argument containers (not module attributes or globals)."""
    while isinstance(source, ItemSource):
        source = source.base
    return isinstance(source, LocalSource)


@dataclass
class SymbolTable:
    """Where each ShapeEnv symbol is read from, and where each ShapeEnv guard was installed."""

    shape_env: ShapeEnv
    sources: dict[sympy.Symbol, str] = field(default_factory=dict)
    locations: dict[sympy.Symbol, UserLocation | None] = field(default_factory=dict)
    aliases: list[tuple[str, str, UserLocation | None]] = field(default_factory=list)
    guard_locations: list[UserLocation | None] = field(default_factory=list)
    sized_inputs: list[tuple[str, sympy.Symbol, UserLocation | None]] = field(default_factory=list)

    def bind(self, expr: Any, reader: str, location: UserLocation | None, *, is_size: bool) -> None:
        """Record that the SymInt `expr` of an input is read by the Python expression `reader`."""
        node = getattr(expr, "node", None)
        symbol = getattr(node, "expr", None)
        if not isinstance(symbol, sympy.Symbol):
            return
        if symbol in self.sources:
            # The ShapeEnv gave two readers the same symbol: they must stay equal.
            self.aliases.append((reader, self.sources[symbol], location))
            return
        self.sources[symbol] = reader
        self.locations[symbol] = location
        if is_size:
            self.sized_inputs.append((reader, symbol, location))

    def bind_tensor(self, fake: torch.Tensor, reader: str, location: UserLocation | None) -> None:
        """Bind the symbols of a fake input's sizes, strides and storage offset to reads of `reader`."""
        for dim, size in enumerate(fake.shape):
            self.bind(size, f"{reader}.size({dim})", location, is_size=True)
        for dim, stride in enumerate(fake.stride()):
            self.bind(stride, f"{reader}.stride({dim})", location, is_size=False)
        self.bind(fake.storage_offset(), f"{reader}.storage_offset()", location, is_size=False)

    def render(self, expr: Any, read: Callable[[str], str] | None = None) -> str:
        """A Python expression (over L, G, C) computing the SymPy expression `expr` on a call.

        `read` maps each reader (``L[0].size(1)``) to the text used for it (a local bound earlier).
        """
        expr = sympy.sympify(getattr(getattr(expr, "node", None), "expr", expr))
        unknown = [s for s in expr.free_symbols if s not in self.sources]
        if unknown:
            raise KeyError(f"size symbol(s) {sorted(map(str, unknown))} have no input they are read from")
        named = expr.xreplace({s: sympy.Symbol(read(self.sources[s]) if read else self.sources[s], integer=True)
                               for s in expr.free_symbols})
        return str(PythonPrinter().doprint(named))

    def note_new_guards(self, location: UserLocation | None) -> None:
        """Attribute the ShapeEnv guards added since the last call to `location`."""
        missing = len(self.shape_env.guards) - len(self.guard_locations)
        if missing > 0:
            self.guard_locations.extend([location] * missing)


def shape_guards(table: SymbolTable, guards: GuardSet, backend_location: UserLocation | None) -> None:
    """Add the size guards of this trace to `guards` (call after the backend compiled the graph).

    * each symbolic size is at least 2 (sizes 0 and 1 are specialized, so they recompile);
    * inputs the ShapeEnv gave the same symbol are equal;
    * every guard the ShapeEnv recorded, i.e. every relation the trace relied on
      (``L[0].size(0) == L[1].size(0)`` for a broadcast, ``L[0].size(1) > 4`` for a branch);
    * every replacement the ShapeEnv made (a symbol it found equal to a constant or another size).
    """
    table.note_new_guards(backend_location)  # guards added while the backend traced the graph
    for reader, _symbol, location in table.sized_inputs:
        # Narrower ranges the trace learned come with their own guards below (and their lines).
        guards.add("SIZE_RANGE", reader, f"{reader} >= {MIN_SYMBOLIC_SIZE}",
                   f"{reader} >= {MIN_SYMBOLIC_SIZE} (a dynamic size; 0 and 1 are specialized)",
                   location=location, subjects=(reader,))
    for reader, first, location in table.aliases:
        guards.add("SIZE_MATCH", reader, f"{reader} == {first}", f"{reader} == {first}", location=location,
                   subjects=(reader, first))
    try:
        for index, shape_guard in enumerate(table.shape_env.guards):
            location = table.guard_locations[index] if index < len(table.guard_locations) else backend_location
            _add_expression_guard(table, guards, shape_guard.expr, location)
        for symbol, replacement in table.shape_env.replacements.items():
            if symbol in table.sources and replacement != symbol:
                _add_expression_guard(table, guards, sympy.Eq(symbol, replacement), table.locations.get(symbol))
    except KeyError as error:
        # A relation over a symbol no input provides cannot be checked: reuse the graph only for
        # exactly these sizes (correct, just not general).
        hints = getattr(table.shape_env, "backed_var_to_val", None)
        if hints is None:  # torch before 2.12
            hints = table.shape_env.var_to_val
        for symbol, reader in table.sources.items():
            value = hints.get(symbol)
            if value is not None:
                guards.add("SHAPE", reader, f"{reader} == {int(value)}", f"{reader} == {int(value)} ({error})",
                           location=table.locations.get(symbol), subjects=(reader,))


def _add_expression_guard(table: SymbolTable, guards: GuardSet, expr: Any, location: UserLocation | None) -> None:
    if expr is sympy.true or expr is True:
        return
    code = table.render(expr)
    subjects = tuple(table.sources[s] for s in sorted(expr.free_symbols, key=str) if s in table.sources)
    guards.add("SHAPE", subjects[0] if subjects else "sizes", code, code, location=location, subjects=subjects)


def first_use_location(code: Any, name: str) -> UserLocation | None:
    """Where argument `name` of `code` is first read (the line whose code relies on its guards)."""
    for instr in code_info(code).instructions:
        if instr.name in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_LOAD_FAST") and \
                name in local_names(instr):
            if isinstance(instr.lineno, int):
                return UserLocation(code.co_filename, instr.lineno, code.co_name)
    return UserLocation(code.co_filename, code.co_firstlineno, code.co_name)

