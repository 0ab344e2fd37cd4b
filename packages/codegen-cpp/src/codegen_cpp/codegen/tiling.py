"""Tiles of output vectors for reductions vectorized across outputs (column sums).

Vectorized across outputs, one vector of ``kiln::VEC`` outputs runs its whole reduction loop (a
column sum walks down the rows, one cache line per row, with a single chain of dependent adds).
Tiled, ``T`` adjacent vectors of outputs share the reduction loop: each row reads ``T``
contiguous vectors, into ``T`` independent accumulators (an array indexed by ``kiln_c``), so
the loads stream and the adds overlap. The per-vector code is unchanged: inside the tile loop,
the vector variable is ``<var>_tile + VEC * kiln_c``, and each accumulator name ``accN`` becomes
``accN[kiln_c]``.

With a static row length, a tile is as long as the row allows (up to ``MAX_ROW_TILE`` vectors),
split at run time into one tile per thread when the tiles are what the threads share: each row
step then reads one long contiguous run per input instead of 8 vectors 16 KB apart, which the
hardware prefetchers follow (a bias-GELU backward over 512x4096 with its column sum, one thread:
12.7 -> 8.9 ms; the accumulators, a few KB per row, stay in L1/L2).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sympy

from codegen_cpp.codegen.lanes import VECTOR_LANES

__all__ = ["MAX_ROW_TILE", "MAX_TILE", "TiledAccumulators", "tile_loop", "tile_step", "tile_vectors", "tiled_values"]

MAX_TILE = 8  # output vectors per tile of a symbolic row: 8 accumulators, 8 vectors of a row each
MAX_ROW_TILE = 256  # output vectors per tile of a static row (2048 floats of it; 16 KB of double lanes)
_DECLARATION = re.compile(r"^(?P<type>[\w:<>]+) (?P<name>acc\w+) = (?P<init>.+);$")
_HOISTED = re.compile(r"^const auto (?P<name>tmp\w+) = (?P<expr>.+);$")
_REDUCED = re.compile(r"\bred\w+")
_LAMBDA = re.compile(r"\[[&=]")  # a lambda (lane indices): C++17 allows none inside decltype


def tile_vectors(size: sympy.Expr) -> int:
    """Output vectors per tile (the accumulator arrays' length) for a vector dim of ``size``: the
    whole row up to ``MAX_ROW_TILE`` when static (see :func:`tile_step`), else 4."""
    if not size.is_Integer:
        return 4
    return max(1, min(MAX_ROW_TILE, int(size) // VECTOR_LANES))


def tile_step(size: sympy.Expr, tile: int, threads: str | None) -> str:
    """The C++ expression of the vectors a tile runs: ``tile``, or, when the tiles are what
    ``threads`` threads share (None: they run on one), the row split evenly among them."""
    if threads is None or not size.is_Integer:
        return str(tile)
    vectors = int(size) // VECTOR_LANES
    return f"std::min<int64_t>({tile}, ({vectors} + {threads} - 1) / ({threads}))"


class TiledAccumulators:
    """The accumulators of one tiled reduction loop, declared as arrays of ``tile`` entries.

    Args:
        pre: the loop's declarations (``TYPE accN = INIT;`` lines only, else :meth:`parse` gives None).
        tile: entries per array.
    """

    def __init__(self, declarations: list[tuple[str, str, str]], tile: int) -> None:
        self.declarations = declarations
        self.tile = tile
        names = sorted((name for _, name, _ in declarations), key=len, reverse=True)
        self._pattern = re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b") if names else None

    @classmethod
    def parse(cls, pre: Sequence[str], tile: int) -> TiledAccumulators | None:
        """The accumulators declared by ``pre``; None when a line is not a plain declaration."""
        declarations = []
        for line in pre:
            match = _DECLARATION.match(line)
            if match is None:
                return None
            declarations.append((match["type"], match["name"], match["init"]))
        return cls(declarations, tile)

    @staticmethod
    def element_type(kind: str, init: str) -> str:
        """The C++ type of one entry of an accumulator declared ``kind name = init;``."""
        return "std::decay_t<decltype(" + init + ")>" if kind == "auto" else kind

    def declare(self) -> list[str]:
        """Array declarations, every entry set to the accumulator's initial value."""
        lines = []
        for kind, name, init in self.declarations:
            array_type = self.element_type(kind, init)
            lines.append(f"{array_type} {name}[{self.tile}];")
            lines.append(f"for (int64_t kiln_c = 0; kiln_c < {self.tile}; ++kiln_c) {name}[kiln_c] = {init};")
        return lines

    def per_vector(self, lines: Sequence[str]) -> list[str]:
        """``lines`` with each accumulator replaced by its entry for output vector ``kiln_c``."""
        if self._pattern is None:
            return list(lines)
        pattern = self._pattern
        return [pattern.sub(r"\1[kiln_c]", line) for line in lines]


def tile_loop(var: sympy.Symbol, count: str, body: Sequence[str], indent: str) -> list[str]:
    """``for kiln_c in [0, count)`` with ``var`` the output vector's first index, around ``body``."""
    return [
        f"for (int64_t kiln_c = 0; kiln_c < {count}; ++kiln_c) {{",
        indent + f"const int64_t {var.name} = {var.name}_tile + {VECTOR_LANES} * kiln_c;",
        *(indent + line for line in body),
        "}",
    ]


def tiled_values(
    var: sympy.Symbol, lines: Sequence[str], tile: int, indent: str
) -> tuple[list[str], re.Pattern[str] | None] | None:
    """Values computed once per output vector before a tiled loop (``const auto tmpN = expr;`` lines
    hoisted out of it, reading ``var``): one array entry per vector of the tile, filled before the loop.

    Returns the lines declaring and filling the arrays, and the pattern of their names (each use in
    the loop becomes ``tmpN[kiln_c]``); None when a line is not such a value, reads a reduction
    result (those live in the tile loops of an earlier loop) or holds a lambda (its array's type is
    spelled with ``decltype``, where C++17 allows none).
    """
    parsed: list[tuple[str, str]] = []
    for line in lines:
        match = _HOISTED.match(line)
        if match is None or _REDUCED.search(match["expr"]) or _LAMBDA.search(match["expr"]):
            return None
        parsed.append((match["name"], match["expr"]))
    if not parsed:
        return [], None
    declarations: list[str] = []
    names: list[str] = []
    vector = re.compile(rf"\b{re.escape(var.name)}\b")
    for name, expr in parsed:
        earlier = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None
        typed = earlier.sub(r"\1[0]", expr) if earlier is not None else expr
        # The type of one vector's value (decltype does not evaluate it).
        declarations.append(f"std::decay_t<decltype({vector.sub(var.name + '_tile', typed)})> {name}[{tile}];")
        names.append(name)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    fill = [name + "[kiln_c] = " + pattern.sub(r"\1[kiln_c]", expr) + ";" for name, expr in parsed]
    return [*declarations, *tile_loop(var, "kiln_tile_n", fill, indent)], pattern
