"""Reusing expensive values across the reduction loops of one kernel.

Softmax runs ``exp(x - max)`` in loop 1 (to sum it) and again in loop 2 (to divide it). When a
later loop of a kernel recomputes a value an earlier loop computed at the same reduction index
(same expression, structurally) and the value is expensive (a transcendental function), the
earlier loop also stores it to a per-row scratch array on the stack and the later loop loads it
back: one vector store and load instead of a second ``exp``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch

from codegen_cpp.codegen.dtypes import cpp_dtype

__all__ = ["LoopValueReuse", "is_expensive"]

_EXPENSIVE = re.compile(
    r"kiln::(exp|expm1|log|log1p|log2|log10|sin|cos|tan|tanh|erf|erfc|sigmoid|pow|atan2)\("
)
MAX_SCRATCH_ELEMENTS = 16384  # 64 KiB of float32 per array, on each thread's stack
MAX_SCRATCH_ARRAYS = 8


def is_expensive(canonical: str) -> bool:
    """Whether recomputing the value costs more than a store and a load."""
    return bool(_EXPENSIVE.search(canonical))


@dataclass
class _Definition:
    loop: int
    lines: list[str]
    name: str
    dtype: torch.dtype
    scratch: str | None = None


@dataclass
class LoopValueReuse:
    """Per kernel: the expensive values each reduction loop defined, and the scratch arrays made.

    size: elements of the reduction range (the scratch length, a C++ expression: with a symbolic
    range the arrays are variable-length, and the kernel runs this variant only when the range is
    at most ``MAX_SCRATCH_ELEMENTS``); index: the C++ linear reduction index (lane 0's in vector
    code); loop: the loop whose bodies are being generated.
    """

    size: str
    index: str
    loop: int = 0
    declarations: list[str] = field(default_factory=list)
    _definitions: dict[tuple[bool, str], _Definition] = field(default_factory=dict)

    def load_instead(self, canonical: str, vector: bool) -> str | None:
        """A load of the value from an earlier loop's scratch array, or None if it must be computed."""
        found = self._definitions.get((vector, canonical))
        if found is None or found.loop >= self.loop:
            return None
        if found.scratch is None:
            if len(self.declarations) >= MAX_SCRATCH_ARRAYS:
                return None  # bound the stack each thread needs: recompute the rest
            found.scratch = f"scratch{len(self.declarations)}"
            scalar = cpp_dtype(found.dtype).scalar
            self.declarations.append(f"alignas(64) {scalar} {found.scratch}[{self.size}];")
            store = "kiln::store" if vector else "kiln::store1"
            position = next(
                i for i, line in enumerate(found.lines) if line.startswith(f"auto {found.name} = ")
            )
            found.lines.insert(position + 1, f"{store}({found.scratch} + {self.index}, {found.name});")
        load = "kiln::load" if vector else "kiln::load1"
        return f"{load}({found.scratch} + {self.index})"

    def adopt(self, canonical: str, vector: bool, name: str, dtype: torch.dtype, lines: list[str], array: str) -> None:
        """The current loop already stores ``name`` into ``array`` (a reduction's row, at this
        reduction index): later loops load the value from there instead of keeping another copy."""
        found = self._definitions.get((vector, canonical))
        if found is None or found.loop != self.loop:
            found = self._definitions[(vector, canonical)] = _Definition(self.loop, lines, name, dtype)
        if found.scratch is None:
            found.scratch = array

    def record(self, canonical: str, vector: bool, name: str, dtype: torch.dtype, lines: list[str]) -> None:
        """Remember that the current loop computed ``name`` (in ``lines``)."""
        self._definitions.setdefault((vector, canonical), _Definition(self.loop, lines, name, dtype))
