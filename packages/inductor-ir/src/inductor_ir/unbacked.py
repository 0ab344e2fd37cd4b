"""Unbacked symbols: sizes and numbers that only the data gives.

``nonzero``, ``masked_select``, ``unique`` and boolean-mask indexing return tensors whose sizes are
unbacked symbols of the ShapeEnv (``u0``); ``Tensor.item()`` (``aten._local_scalar_dense``) returns
one as a number (``u1``, or ``zuf0`` for a float). No graph input provides them: the op that makes
them runs as a ``FallbackKernel`` and the wrapper reads each symbol from its result right after it
(``u0 = buf3.size(0)``, ``u1 = buf4``). Later kernels, allocations and calls use them like any size
symbol read from an input. The checks ``torch._check`` put on them while tracing (``u0 >= 0``, the
split sizes summing to the dim) are run by the wrapper as soon as their symbols are bound, raising
``RuntimeError`` as eager does instead of reading out of bounds; so are the graph's own
``aten._assert_scalar`` nodes (the user's ``torch._check(n <= x.shape[1])``, which aotgrad writes into
the graph), and the calls binding their symbols run even when nothing else uses them. A check that
pins a symbol to one value (``torch._check(n == 5)``) makes the ShapeEnv replace it by that value:
sizes and values read as 5, but the symbol is still bound (from the node's ``unbacked_bindings``) and
the check is made as traced (``u0 >= 5``), not as the replaced ``True``.

Floats and booleans from ``item()`` (``zuf0``, ``Eq(u0, 1)``) never reach generated kernels, whose
size arguments are ints: ops reading one run as ``FallbackKernel`` calls given the Python number,
and an int computed from floats (``int(t.item())``) is computed by the wrapper. What cannot be
compiled this way raises :class:`UnbackedSymbolError` while compiling, so the caller runs the graph
eagerly with that reason (a symbol only found inside a larger expression of a size).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import sympy
import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import CallMethodKey, free_unbacked_symbols
from torch.utils._sympy.symbol import SymT, symbol_is_type

from inductor_ir.ir.nodes import Buffer, ComputedBuffer, ExternKernel, MultiOutput, Pointwise, ReinterpretView
from inductor_ir.ir.program import Program, SizeSource
from inductor_ir.ir.tracing import trace_body
from inductor_ir.symbolic import index_symbol

__all__ = [
    "UNBACKED_HINT",
    "UnbackedSymbolError",
    "bind_int_of_float",
    "bind_results",
    "bind_scalar",
    "float_arguments",
    "is_unbacked",
    "is_unbacked_float",
    "output_definers",
    "pinned_unbacked",
    "record_assert",
    "runtime_checks",
    "symbol_definers",
    "unbound_unbacked",
    "used_symbols",
]

UNBACKED_HINT = 4096
"""The size assumed for an unbacked symbol by heuristics (tiling, vector widths); never for correctness."""


class UnbackedSymbolError(NotImplementedError):
    """A graph whose data-dependent sizes or values the generated code cannot bind or use."""


def is_unbacked(symbol: sympy.Symbol) -> bool:
    """Whether ``symbol`` is a ShapeEnv unbacked int or float (``u0``, ``zuf0``)."""
    return bool(symbol_is_type(symbol, (SymT.UNBACKED_INT, SymT.UNBACKED_FLOAT)))


def is_unbacked_float(symbol: sympy.Symbol) -> bool:
    """Whether ``symbol`` is a float value read with ``item()`` (``zuf0``)."""
    return bool(symbol_is_type(symbol, SymT.UNBACKED_FLOAT))


def unbound_unbacked(program: Program, value: Any) -> set[sympy.Symbol]:
    """Unbacked symbols in ``value`` (an FX ``meta['val']``) that no earlier step binds.

    A tensor's storage offset does not count: an ATen call's result carries its own (a slice of
    ``x`` from ``u0`` on), and buffers made from it are read through the result.
    """
    parts = [[*leaf.shape, *leaf.stride()] if isinstance(leaf, torch.Tensor) else leaf
             for leaf in pytree.tree_leaves(value)]
    try:
        symbols = free_unbacked_symbols(parts)
    except Exception:  # values FX could not describe: nothing to bind
        return set()
    return {s for s in symbols if s not in program.size_sources}


def pinned_unbacked(program: Program, bindings: Any, unbound: set[sympy.Symbol]) -> dict[sympy.Symbol, tuple[Any, ...]]:
    """The unbacked sizes and strides an op's result binds (its FX ``meta['unbacked_bindings']``:
    symbol -> key path, ``.size()[0]``) that the ShapeEnv has replaced: neither an earlier step binds
    them nor do they show in the result's sizes (``unbound``, from ``unbound_unbacked``).

    ``torch._check(nonzero(t).size(0) == 2)`` makes the ShapeEnv replace ``u0`` by 2: the result's
    sizes then read as 2, yet the wrapper must still read ``u0`` from the result to run the graph's
    checks on it (``u0 >= 2``).
    """
    if not isinstance(bindings, dict):
        return {}
    return {s: tuple(path) for s, path in bindings.items()
            if isinstance(s, sympy.Symbol) and is_unbacked(s) and s not in program.size_sources
            and s not in unbound and _is_size_or_stride(tuple(path))}


def _is_size_or_stride(path: tuple[Any, ...]) -> bool:
    """Whether ``path`` reads a size or stride: ``[k].size()[d]`` or ``.stride()[d]`` (not a storage offset)."""
    return (len(path) >= 2 and isinstance(path[-2], CallMethodKey) and path[-2].name in ("size", "stride")
            and isinstance(path[-1], pytree.SequenceKey)
            and all(isinstance(key, pytree.SequenceKey) for key in path[:-2]))


def _source_at(result: Any, path: tuple[Any, ...]) -> SizeSource | None:
    """Where the wrapper reads the size or stride at key path ``path`` of ``result`` (None: not one)."""
    value = result
    for position, key in enumerate(path):
        if isinstance(key, pytree.SequenceKey) and isinstance(value, (list, tuple)) and key.idx < len(value):
            value = value[key.idx]
            continue
        rest = path[position + 1:]
        if (isinstance(key, CallMethodKey) and key.name in ("size", "stride") and isinstance(value, Buffer)
                and len(rest) == 1 and isinstance(rest[0], pytree.SequenceKey)):
            return SizeSource(-1, key.name, rest[0].idx, value.name)
        return None
    return None


def _buffers(result: Any) -> Iterator[Buffer]:
    if isinstance(result, Buffer):
        yield result
    elif isinstance(result, (list, tuple)):
        for item in result:
            yield from _buffers(item)


def bind_results(program: Program, result: Any, wanted: set[sympy.Symbol], shape_env: Any,
                 paths: dict[sympy.Symbol, tuple[Any, ...]] | None = None) -> None:
    """Read each symbol of ``wanted`` from a size or stride of the buffers of ``result``: where
    ``paths`` (``pinned_unbacked``) gives its key path, from there, else where a layout shows it.

    Raises ``UnbackedSymbolError`` when one only appears inside a larger expression (``2*u0``).
    """
    for symbol, path in (paths or {}).items():
        source = _source_at(result, path)
        if symbol in wanted and source is not None and symbol not in program.size_sources:
            program.size_sources[symbol] = source
            program.size_hints.setdefault(symbol, UNBACKED_HINT)
    for buf in _buffers(result):
        layout = buf.layout
        for kind, exprs in (("size", layout.size), ("stride", layout.stride)):
            for dim, expr in enumerate(exprs):
                if isinstance(expr, sympy.Symbol) and expr in wanted and expr not in program.size_sources:
                    program.size_sources[expr] = SizeSource(-1, kind, dim, buf.name)
                    program.size_hints.setdefault(expr, UNBACKED_HINT)
    missing = sorted(str(s) for s in wanted if s not in program.size_sources)
    if missing:
        raise UnbackedSymbolError(f"the data-dependent size(s) {', '.join(missing)} of an op's result are not a "
                                  "plain size or stride of it; the generated code cannot read them")
    _remember_shape_env(program, shape_env)


def bind_scalar(program: Program, kernel: ExternKernel, value: Any) -> sympy.Basic:
    """The expression of ``item()``'s result ``value``, its symbol read from ``kernel``'s result: a
    SymInt or SymFloat is its symbol (``u0``, ``zuf0``), a SymBool ``Eq(u0, 1)`` (``u0`` the bool)."""
    expr = getattr(getattr(value, "node", None), "expr", None)
    # `torch._check(n == 5)` makes the ShapeEnv replace u0 by 5 (or by `s0` for `n == x.shape[0]`):
    # the value is that expression, but the wrapper still reads u0 to check the graph's assertions on it.
    symbol = _scalar_symbol(value, expr)
    if symbol is None:
        symbol = _scalar_symbol(value, _traced_expr(value))
    if symbol is None:
        raise UnbackedSymbolError(f"a data-dependent {type(value).__name__} ({expr}) cannot be bound by the "
                                  "generated code")
    program.size_sources[symbol] = SizeSource(-1, "item", 0, kernel.name)
    if not is_unbacked_float(symbol):
        program.size_hints.setdefault(symbol, UNBACKED_HINT)
    _remember_shape_env(program, getattr(value.node, "shape_env", None))
    return expr


def _scalar_symbol(value: Any, expr: Any) -> sympy.Symbol | None:
    """The unbacked symbol of ``item()``'s result given its expression (``Eq(u0, 1)`` for a SymBool)."""
    if isinstance(value, torch.SymBool) and isinstance(expr, sympy.Eq) and expr.rhs == 1:
        expr = expr.lhs
    return expr if isinstance(expr, sympy.Symbol) and is_unbacked(expr) else None


def _traced_expr(value: Any) -> Any:
    """The expression ``value`` had when it was traced, before the ShapeEnv's later replacements
    (``SymNode.expr`` applies them: after ``torch._check(u0 == 5)``, ``u0 >= 5`` reads as True)."""
    return getattr(getattr(value, "node", None), "_expr", None)


def bind_int_of_float(program: Program, value: torch.SymInt) -> sympy.Symbol:
    """An int computed from ``item()`` floats (``int(x.sum().item())``: ``TruncToInt(zuf0)``): a new
    symbol the wrapper computes in Python once the floats are bound, so kernels only see ints."""
    from torch.utils._sympy.printers import PythonPrinter

    expr = value.node.expr
    floats = [s for s in program.size_sources if s in expr.free_symbols and is_unbacked_float(s)]
    unknown = [s for s in expr.free_symbols if s not in program.size_sources]
    if not floats or unknown:
        raise UnbackedSymbolError(f"the data-dependent int {expr} cannot be computed by the generated code")
    symbol = sympy.Symbol(f"ui{sum(1 for s in program.size_sources.values() if s.kind == 'python')}", integer=True)
    text = PythonPrinter().doprint(expr)
    program.size_sources[symbol] = SizeSource(-1, "python", 0, program.size_sources[floats[-1]].buffer, text)
    program.size_hints.setdefault(symbol, UNBACKED_HINT)
    return symbol


def float_arguments(values: Any) -> bool:
    """Whether an op's arguments hold a float or bool ``item()`` value (``zuf0``, ``Eq(u0, 1)``):
    generated kernels take sizes as ints, so such an op runs as a ``FallbackKernel`` (the wrapper
    passes the Python number)."""
    return _has_boolean([values]) or any(is_unbacked_float(s) for s in _free_symbols([values]))


def _has_boolean(values: Iterable[Any]) -> bool:
    for value in values:
        if isinstance(value, sympy.logic.boolalg.Boolean) and not isinstance(
                value, (sympy.Symbol, sympy.logic.boolalg.BooleanAtom)):
            return True
        if isinstance(value, (list, tuple)) and _has_boolean(value):
            return True
        if isinstance(value, dict) and _has_boolean(value.values()):
            return True
    return False


def _remember_shape_env(program: Program, shape_env: Any) -> None:
    if shape_env is not None and program.shape_env is None:
        program.shape_env = shape_env


def _free_symbols(values: Iterable[Any]) -> set[sympy.Symbol]:
    symbols: set[sympy.Symbol] = set()
    for value in values:
        if isinstance(value, sympy.Basic):
            symbols |= {s for s in value.free_symbols if isinstance(s, sympy.Symbol)}
        elif isinstance(value, (ReinterpretView, Buffer)):
            layout = value.layout
            symbols |= _free_symbols((*layout.size, *layout.stride, getattr(layout, "offset", 0)))
        elif isinstance(value, (list, tuple)):
            symbols |= _free_symbols(value)
        elif isinstance(value, dict):
            symbols |= _free_symbols(value.values())
    return symbols


def used_symbols(buf: Buffer) -> set[sympy.Symbol]:
    """Every symbol ``buf``'s computation uses: its layout, its body's indices, an extern call's arguments."""
    symbols = _free_symbols([buf])
    if isinstance(buf, ExternKernel):
        symbols |= _free_symbols([buf.args, buf.kwargs])
    elif isinstance(buf, ComputedBuffer):
        data = buf.data
        index = [index_symbol("i", k) for k in range(len(data.ranges))]
        symbols |= _free_symbols(data.ranges)
        if isinstance(data, Pointwise):
            trace = trace_body(buf.store_pointwise, index, text=False)
        else:
            symbols |= _free_symbols(data.reduction_ranges)
            rindex = [index_symbol("r", k) for k in range(len(data.reduction_ranges))]
            trace = trace_body(buf.store_reduction, index, rindex, text=False)
        for dep in (*trace.deps.reads, *trace.deps.writes):
            symbols |= _free_symbols([dep.index])
        symbols |= set(trace.deps.index_symbols)
    return symbols


def symbol_definers(program: Program) -> dict[str, set[str]]:
    """Buffer name -> the buffers whose results bind the unbacked symbols it uses (empty: none).

    The scheduler orders each buffer after those, and keeps them live while it is.
    """
    definers = {symbol: source.buffer for symbol, source in program.size_sources.items() if source.buffer}
    if not definers:
        return {}
    result: dict[str, set[str]] = {}
    for buf in program.buffers:
        if isinstance(buf, MultiOutput):
            continue
        names = {definers[s] for s in used_symbols(buf) if s in definers} - {buf.name}
        if names:
            result[buf.name] = names
    return result


def output_definers(program: Program) -> set[str]:
    """The buffers binding unbacked symbols that graph outputs (a returned ``item()``) or the graph's
    runtime checks use: they run even when no kernel reads them."""
    definers = {symbol: source.buffer for symbol, source in program.size_sources.items() if source.buffer}
    if not definers:
        return set()
    return {definers[s] for s in _free_symbols([program.outputs, program.runtime_asserts]) if s in definers}


def record_assert(program: Program, condition: Any) -> None:
    """Keep the condition of an ``aten._assert_scalar`` node for the wrapper to check (``condition`` is
    its first argument's ``meta['val']``: a SymBool, or a bool). One known true needs no check.

    Raises ``UnbackedSymbolError`` when no earlier step binds one of its symbols.
    """
    expr = getattr(getattr(condition, "node", None), "expr", None)
    if expr is None:
        if not isinstance(condition, bool):
            raise UnbackedSymbolError(f"a runtime check on {condition!r} cannot be checked by the generated code")
        expr = sympy.true if condition else sympy.false
    # Checked as traced: the ShapeEnv may since have replaced its symbol by the constant the check pins
    # it to (`torch._check(n == 5)`: `u0 >= 5` reads as True), folding the check away.
    traced = _traced_expr(condition)
    if isinstance(traced, sympy.Basic) and traced != expr:
        if traced.free_symbols <= set(program.size_sources):
            expr = traced
        elif expr == sympy.true:  # folded away by a replacement the generated code cannot check
            raise UnbackedSymbolError(f"the runtime check {traced} uses "
                                      f"{', '.join(sorted(str(s) for s in traced.free_symbols))}, which the "
                                      "generated code does not bind")
    if expr == sympy.true:
        return
    unknown = sorted(str(s) for s in expr.free_symbols if s not in program.size_sources)
    if unknown:
        raise UnbackedSymbolError(f"the runtime check {expr} uses {', '.join(unknown)}, which the generated code "
                                  "does not bind")
    if expr not in program.runtime_asserts:
        program.runtime_asserts.append(expr)
        _remember_shape_env(program, getattr(condition, "node", None) and condition.node.shape_env)


def runtime_checks(program: Program) -> list[tuple[frozenset[sympy.Symbol], sympy.Expr]]:
    """The checks the wrapper runs: the graph's ``_assert_scalar`` conditions, then the ShapeEnv's
    deferred runtime assertions on this program's unbacked symbols, each once: (symbols they need,
    condition in torch's SymPy functions). Their messages name torch's source lines only."""
    asserts = getattr(program.shape_env, "deferred_runtime_asserts", None) or {}
    deferred = [entry.expr for entries in list(asserts.values()) for entry in entries]
    unbacked = {s for s, source in program.size_sources.items() if source.buffer}
    checks = []
    seen: set[sympy.Expr] = set()
    for expr in [*program.runtime_asserts, *deferred]:
        symbols = frozenset(s for s in expr.free_symbols if isinstance(s, sympy.Symbol))
        if expr in seen or not symbols <= set(program.size_sources):
            continue
        if expr not in program.runtime_asserts and not symbols & unbacked:
            continue  # a ShapeEnv assertion on input sizes only: capture's guards check those
        seen.add(expr)
        checks.append((symbols, expr))
    return checks
