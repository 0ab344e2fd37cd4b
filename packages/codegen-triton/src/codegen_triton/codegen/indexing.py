"""Index variables of a kernel: their definitions from the flat block indices and contiguity rewriting.

A group's pointwise range `(d0, d1, ...)` is flattened into `xindex` (row-major), and its reduction
range into `rindex`; a tiled kernel splits the pointwise dims into outer ones (`yindex`) and inner
ones (`xindex`). Each dimension gets a variable `x_k = (xindex // stride_k) % d_k`. When an access's
index is `c * (x_j * stride_j + ... + x_n)` for a trailing run of dims, that run is rewritten to
`c * (xindex % span)` (or `c * xindex`), which Triton recognises as contiguous: this is what makes
loads and stores of contiguous buffers coalesce and vectorize.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import sympy

from codegen_triton.codegen.printer import TritonIndexPrinter

__all__ = ["AxisDims", "collapse_contiguous"]


@dataclass(frozen=True)
class AxisDims:
    """The dims of one block axis ("x", "y" or "r"): their variables and sizes, outermost first.

    Size-1 dims are left out (their index variable is the constant 0).
    """

    axis: str
    flat: sympy.Symbol
    variables: tuple[sympy.Symbol, ...]
    sizes: tuple[sympy.Expr, ...]

    def numel(self) -> sympy.Expr:
        """The number of elements along this axis."""
        return sympy.Mul(*self.sizes) if self.sizes else sympy.Integer(1)

    def strides(self) -> list[sympy.Expr]:
        """Row-major strides of the dims within the flat index."""
        strides: list[sympy.Expr] = []
        running: sympy.Expr = sympy.Integer(1)
        for size in reversed(self.sizes):
            strides.append(running)
            running = running * size
        return list(reversed(strides))

    def definitions(self, printer: TritonIndexPrinter) -> list[str]:
        """Source lines defining each variable from the flat index."""
        flat = self.flat.name
        if len(self.variables) == 1:
            return [f"{self.variables[0].name} = {flat}"]
        lines = []
        for k, (var, stride) in enumerate(zip(self.variables, self.strides())):
            text = flat if stride == 1 else f"({flat} // {printer.paren(stride)})"
            if k > 0:
                text = f"{text} % {printer.paren(self.sizes[k])}"
            lines.append(f"{var.name} = {text}")
        return lines


def collapse_contiguous(expr: sympy.Expr, dims: Sequence[AxisDims]) -> sympy.Expr:
    """Rewrite trailing runs of row-major terms into the flat index (see the module docstring)."""
    for axis in dims:
        expr = _collapse_axis(expr, axis)
    return expr


@functools.lru_cache(maxsize=1 << 15)
def _collapse_axis(expr: sympy.Expr, axis: AxisDims) -> sympy.Expr:
    # Memoized: a pure function of SymPy values, and the same indices recur in every repeated layer.
    variables = axis.variables
    if not variables:
        return expr
    expanded = sympy.expand(expr)
    last = variables[-1]
    coeff_last = expanded.coeff(last)
    if coeff_last == 0 or coeff_last.free_symbols & set(variables):
        return expr
    strides = axis.strides()
    start = len(variables) - 1
    while start > 0:
        candidate = variables[start - 1]
        wanted = sympy.expand(coeff_last * strides[start - 1])
        if sympy.expand(expanded.coeff(candidate) - wanted) != 0:
            break
        start -= 1
    run = variables[start:]
    rest = sympy.expand(
        expanded
        - sum(sympy.expand(coeff_last * strides[k]) * variables[k] for k in range(start, len(variables)))
    )
    if rest.free_symbols & set(run):
        return expr
    if start == 0:
        flat: sympy.Expr = axis.flat
    elif len(run) == 1:
        return expr
    else:
        span = sympy.Mul(*axis.sizes[start:])
        flat = sympy.Mod(axis.flat, span, evaluate=False)
    return rest + coeff_last * flat
