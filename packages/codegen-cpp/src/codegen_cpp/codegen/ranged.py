"""The C++ ops handler as kernels use it: indices simplified for the loop ranges first.

Also: masked contiguous loads as plain vector loads when every lane is active, lane-invariant
index values kept as scalars, comparisons of indices that are the same in every lane of a vector
decided once per vector, and ``arange`` indices used as plain indices (see each method).
"""

from __future__ import annotations

import dataclasses

import sympy
import torch

from codegen_cpp.codegen.dtypes import cpp_dtype
from codegen_cpp.codegen.handler import CppOpsHandler, CppValue
from codegen_cpp.codegen.indexing import Ranges, simplify_index, upper_bound
from codegen_cpp.codegen.lanes import lane_uniform_sign
from codegen_cpp.codegen.printer import cpp_index
from inductor_ir.ir.checks import IndexCheck

__all__ = ["RangedOpsHandler"]

_PLAIN_LOAD_DTYPES = (torch.float32, torch.float64, torch.int64, torch.int32)
# An order comparison ``a OP b`` is ``t >= 0`` or its negation, for ``t = a - b - shift``.
_SHIFT = {"ge": 0, "lt": 0, "gt": 1, "le": 1}
_OPERATOR = {"ge": ">=", "lt": "<", "gt": ">", "le": "<="}


class RangedOpsHandler(CppOpsHandler):
    """The C++ handler, with every index simplified for the loop ranges first (codegen/indexing.py)
    and lane-invariant index values known as scalars (so indirect loads through them stay loads)."""

    ranges: Ranges = {}

    def load(self, name: str, index: sympy.Expr) -> CppValue:
        """A load at the simplified index.

        Under ``ops.masked`` (concatenation, padding) a contiguous load is a plain vector load
        when every lane is active, zeros when none is, and a masked gather only for the vectors
        that straddle the mask.
        """
        index = sympy.expand(simplify_index(index, self.ranges))
        masks = self._masks
        dtype = self.state.storage.get(name)
        if (
            self.vector
            and masks
            and not index.free_symbols & self.state.unreadable
            and dtype in _PLAIN_LOAD_DTYPES
            and name not in self.state.internal
            and name not in self.scope.stored
            and self._lane_kind(index) == "contiguous"
        ):
            pointer, mask = self.state.pointers[name], masks[-1]
            whole = f"kiln::load({pointer} + {cpp_index(index)})"
            part = f"kiln::gather_masked({pointer}, {self._lane_lambda(index)}, {mask})"
            none = f"kiln::splat<{cpp_dtype(dtype).vector}>(0)"
            text = f"(!kiln::any_lane(~{mask}) ? {whole} : kiln::any_lane({mask}) ? {part} : {none})"
            return self._emit(text, dtype)
        return super().load(name, index)

    def store(self, name: str, index: sympy.Expr, value: CppValue, mode: str | None = None) -> None:
        """A store at the simplified index."""
        super().store(name, simplify_index(index, self.ranges), value, mode)

    def store_reduction(self, name: str, index: sympy.Expr, value: CppValue) -> None:
        """A reduction result stored at the simplified index."""
        super().store_reduction(name, simplify_index(index, self.ranges), value)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> CppValue:
        """The simplified index's value; in vector code, one equal in every lane is marked uniform."""
        expr = sympy.expand(simplify_index(expr, self.ranges))
        value = super().index_expr(expr, dtype)
        if dtype in (torch.int64, torch.int32):
            self.state.symbolic[value.name] = expr
        if self.vector and value.vector and value.uniform is None and dtype == torch.int64:
            if self._lane_kind(expr) == "broadcast":
                value = dataclasses.replace(value, uniform=cpp_index(expr))
        return value

    def where(self, condition: CppValue, a: CppValue, b: CppValue) -> CppValue:
        """``a`` where ``condition`` else ``b``; once, as a scalar, when all three are lane-invariant;
        a choice of whole vectors when only the condition is."""
        if self._scalar_form((condition, a, b), a.dtype):
            text = f"({self._scalar_arg(condition)} ? {self._scalar_arg(a)} : {self._scalar_arg(b)})"
            return self._scalar_value(text, a.dtype)
        if self.vector and condition.uniform is not None:
            text = f"({self._scalar_arg(condition)} ? {self._lift(a)} : {self._lift(b)})"
            return self._emit(text, a.dtype)
        return super().where(condition, a, b)

    def lt(self, a: CppValue, b: CppValue) -> CppValue:
        """a < b (see :meth:`_order`)."""
        return self._order("lt", a, b)

    def le(self, a: CppValue, b: CppValue) -> CppValue:
        """a <= b (see :meth:`_order`)."""
        return self._order("le", a, b)

    def gt(self, a: CppValue, b: CppValue) -> CppValue:
        """a > b (see :meth:`_order`)."""
        return self._order("gt", a, b)

    def ge(self, a: CppValue, b: CppValue) -> CppValue:
        """a >= b (see :meth:`_order`)."""
        return self._order("ge", a, b)

    def _order(self, op: str, a: CppValue, b: CppValue) -> CppValue:
        """An order comparison; of two int64 index values whose comparison has one truth value in
        all lanes of every vector (proven by ``lane_uniform_sign``), a scalar condition on lane 0's
        indices, computed once per vector: ``(x1 % 32) >= 16`` instead of an int64 iota, a compare of
        16 lanes and, where it masks loads, an ``any_lane`` test and a per-lane select.

        Lane ``l`` of an index value holds its expression at ``v0 + l`` (``state.symbolic``), so the
        proof is about the lanes' values and lane 0's scalar comparison is every lane's. Indices read
        from data per lane (``scope.vector_symbols``) are not known that way: no proof through them.
        """
        if self.vector and a.dtype == torch.int64 and b.dtype == torch.int64 and not (a.uniform and b.uniform):
            x, y = self.state.symbolic.get(a.name), self.state.symbolic.get(b.name)
            if x is not None and y is not None and self.vector_var is not None:
                difference = sympy.expand(x - y - _SHIFT[op])
                per_lane = difference.free_symbols & self.scope.vector_symbols.keys()
                if not per_lane and lane_uniform_sign(difference, self.vector_var):
                    return self._scalar_value(f"({cpp_index(x)} {_OPERATOR[op]} {cpp_index(y)})", torch.bool)
        return getattr(super(), op)(a, b)  # type: ignore[no-any-return]

    def constant(self, value: bool | int | float, dtype: torch.dtype) -> CppValue:
        """A literal; integer ones are remembered as index expressions too."""
        result = super().constant(value, dtype)
        if dtype in (torch.int64, torch.int32) and not isinstance(value, bool):
            self.state.symbolic[result.name] = sympy.Integer(int(value))
        return result

    def indirect_indexing(
        self, x: CppValue, size: sympy.Expr, check: bool | IndexCheck = True, wrap_neg: bool = True
    ) -> sympy.Expr:
        """An index read from ``x``; when ``x`` holds a known index expression that stays within
        ``[0, size)`` (an ``arange`` used to index), that expression itself: no wrap, and loads
        through it are analysed like any other index (often contiguous vector loads)."""
        known = self.state.symbolic.get(x.name)
        if known is not None and size.is_Integer:
            bound = upper_bound(known, self.ranges)
            if bound is not None and bound < int(size):
                return known
        return super().indirect_indexing(x, size, check, wrap_neg)
