"""Loop shapes of a kernel: plain nests, a vector loop with its scalar tail, and the blocks of a
blocked (cascade) reduction (codegen/reduction.py), as lines of C++."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sympy

from codegen_cpp.codegen.lanes import VECTOR_LANES
from codegen_cpp.codegen.printer import cpp_index
from codegen_cpp.codegen.reduction import REDUCTION_BLOCK, REDUCTION_OUTER_BLOCK

__all__ = ["INDENT", "Block", "LoopShapes", "indent"]

INDENT = "    "


def indent(lines: Sequence[str], depth: int = 1) -> list[str]:
    """``lines``, each indented ``depth`` levels."""
    return [INDENT * depth + line for line in lines]


@dataclass(frozen=True)
class Block:
    """Lines run before and after each block of a reduction's vector loop (codegen/reduction.py)."""

    pre: list[str]
    post: list[str]


class LoopShapes:
    """Loop-writing helpers of a kernel writer, over its reduction variables ``rs`` / ``r_sizes``."""

    rs: tuple[sympy.Symbol, ...]
    r_sizes: list[sympy.Expr]

    @staticmethod
    def _for(var: sympy.Symbol, start: str, end: str, step: int | str = 1) -> str:
        increment = f"++{var.name}" if step == 1 else f"{var.name} += {step}"
        return f"for (int64_t {var.name} = {start}; {var.name} < {end}; {increment})"

    def _nest(self, loops: Sequence[tuple[sympy.Symbol, sympy.Expr]], body: list[str]) -> list[str]:
        lines = body
        for var, size in reversed(loops):
            lines = [self._for(var, "0", cpp_index(size)) + " {", *indent(lines), "}"]
        return lines

    def _vector_and_tail(
        self,
        var: sympy.Symbol,
        size: sympy.Expr,
        vector_body: list[str],
        scalar_body: list[str],
        block: Block | None = None,
    ) -> list[str]:
        end = f"{var.name}_vec_end"
        return [
            "{",
            INDENT + f"const int64_t {end} = ({cpp_index(size)}) / {VECTOR_LANES} * {VECTOR_LANES};",
            *indent(self._vector_loop(var, end, size, vector_body, block)),
            INDENT + self._for(var, end, cpp_index(size)) + " {",
            *indent(scalar_body, 2),
            INDENT + "}",
            "}",
        ]

    def _vector_loop(
        self,
        var: sympy.Symbol,
        end: str,
        size: sympy.Expr,
        body: list[str],
        block: Block | None,
        pragma: Sequence[str] = (),
    ) -> list[str]:
        """The vector loop ``[0, end)`` of ``body``; with ``block`` lines, run in blocks of
        ``REDUCTION_BLOCK`` elements, each between the block's declarations and its fold.
        ``pragma`` goes right before the loop that threads share (the block loop, if any)."""
        loop = [self._for(var, "0", end, VECTOR_LANES) + " {", *indent(body), "}"]
        if block is None or not (block.pre or block.post):
            return [*pragma, *loop]
        if size.is_Integer and int(size) <= REDUCTION_BLOCK:
            return ["{", *indent(block.pre), *indent([*pragma, *loop]), *indent(block.post), "}"]
        start = f"{var.name}_block"
        stop = f"{var.name}_block_end"
        return [
            *pragma,
            self._for(sympy.Symbol(start), "0", end, REDUCTION_BLOCK) + " {",
            *indent(block.pre),
            INDENT + f"const int64_t {stop} = {start} + {REDUCTION_BLOCK} < {end} ? {start} + {REDUCTION_BLOCK} : {end};",
            INDENT + self._for(var, start, stop, VECTOR_LANES) + " {",
            *indent(body, 2),
            INDENT + "}",
            *indent(block.post),
            "}",
        ]

    def _outer_nest(self, body: list[str], block: Block) -> list[str]:
        """The reduction loops around ``body``; the last in blocks between ``block``'s lines."""
        if not (block.pre or block.post):
            return self._nest(list(zip(self.rs, self.r_sizes)), body)
        var, size = self.rs[-1], self.r_sizes[-1]
        if size.is_Integer and int(size) <= REDUCTION_OUTER_BLOCK:
            last = ["{", *indent(block.pre), *indent(self._nest([(var, size)], body)), *indent(block.post), "}"]
        else:
            start, stop = f"{var.name}_block", f"{var.name}_block_end"
            step = REDUCTION_OUTER_BLOCK
            last = [
                self._for(sympy.Symbol(start), "0", cpp_index(size), step) + " {",
                *indent(block.pre),
                INDENT + f"const int64_t {stop} = {start} + {step} < {cpp_index(size)} ? {start} + {step} : {cpp_index(size)};",
                INDENT + self._for(var, start, stop) + " {",
                *indent(body, 2),
                INDENT + "}",
                *indent(block.post),
                "}",
            ]
        return self._nest(list(zip(self.rs[:-1], self.r_sizes[:-1])), last)

    def _range_nest(self, var: sympy.Symbol, begin: str, end: str, body: list[str], block: Block) -> list[str]:
        """The one reduction loop over ``[begin, end)`` around ``body``, in blocks of
        ``REDUCTION_OUTER_BLOCK`` steps between ``block``'s lines when it has any."""
        if not (block.pre or block.post):
            return [self._for(var, begin, end) + " {", *indent(body), "}"]
        start, stop = f"{var.name}_block", f"{var.name}_block_end"
        step = REDUCTION_OUTER_BLOCK
        return [
            self._for(sympy.Symbol(start), begin, end, step) + " {",
            *indent(block.pre),
            INDENT + f"const int64_t {stop} = {start} + {step} < {end} ? {start} + {step} : {end};",
            INDENT + self._for(var, start, stop) + " {",
            *indent(body, 2),
            INDENT + "}",
            *indent(block.post),
            "}",
        ]
