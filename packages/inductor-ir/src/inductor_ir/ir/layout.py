"""`Layout`: where the elements of a buffer live, with every size, stride and offset a SymPy expression."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import sympy
import torch

__all__ = ["Layout", "contiguous_strides"]


def contiguous_strides(size: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """Row-major strides for ``size`` (size-1 dims get the stride of the next dim, as torch does)."""
    strides: list[sympy.Expr] = []
    running: sympy.Expr = sympy.Integer(1)
    for dim in reversed(size):
        strides.append(running)
        running = running * dim
    return tuple(reversed(strides))


@dataclass(frozen=True, slots=True)
class Layout:
    """Device, dtype, size, stride and offset (in elements) of a buffer or a strided view of one."""

    device: str
    dtype: torch.dtype
    size: tuple[sympy.Expr, ...]
    stride: tuple[sympy.Expr, ...]
    offset: sympy.Expr = sympy.Integer(0)  # noqa: RUF009 - an immutable SymPy integer
    # index tuple -> element offset: scheduling and code generation run each body many times with
    # the same index variables, and SymPy arithmetic (even through its own cache) is slow.
    _offsets: dict[tuple[sympy.Expr, ...], sympy.Expr] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    @staticmethod
    def contiguous(device: str, dtype: torch.dtype, size: Sequence[sympy.Expr]) -> Layout:
        """A row-major layout of ``size``."""
        return Layout(device, dtype, tuple(size), contiguous_strides(size))

    def index(self, index: Sequence[sympy.Expr]) -> sympy.Expr:
        """The element offset of ``index`` (one expression per dim)."""
        key = tuple(index)
        found = self._offsets.get(key)
        if found is None:
            assert len(key) == len(self.size), (index, self.size)
            # One n-ary Add (the same canonical sum as adding term by term, without its intermediates).
            found = sympy.Add(self.offset, *[i * s for i, s in zip(key, self.stride) if s != 0])
            self._offsets[key] = found
        return found

    def numel(self) -> sympy.Expr:
        """Number of elements."""
        return sympy.Mul(*self.size) if self.size else sympy.Integer(1)

    def storage_size(self) -> sympy.Expr:
        """Elements of storage needed from the data pointer: offset + max index + 1."""
        return self.offset + sum(((n - 1) * s for n, s in zip(self.size, self.stride)), sympy.Integer(0)) + 1

    def is_contiguous(self) -> bool:
        """Whether the layout is row-major with offset 0 (ignoring strides of size-1 dims)."""
        expected = contiguous_strides(self.size)
        return self.offset == 0 and all(n == 1 or _equal(s, e) for n, s, e in zip(self.size, self.stride, expected))

    def __str__(self) -> str:
        size = ", ".join(str(s) for s in self.size)
        stride = ", ".join(str(s) for s in self.stride)
        dtype = str(self.dtype).removeprefix("torch.")
        offset = "" if self.offset == 0 else f", offset={self.offset}"
        return f"Layout('{self.device}', {dtype}, size=[{size}], stride=[{stride}]{offset})"


def _equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Whether two stride expressions are equal: the same expression, or one expanding to the other.

    Not ``sympy.simplify``: with symbolic sizes built from ``Max`` (SAME padding, at every layer of
    BiT) it took minutes per layout; an equality it cannot show only costs a view its index arithmetic.
    """
    if a == b:
        return True
    return bool(sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0)
