"""`DtypeHandler`: runs a body on dtypes instead of values, and checks the vocabulary's dtype rules.

Every value is its ``torch.dtype``: ``load`` gives the buffer's dtype, ``to_dtype``/``constant``/
``index_expr``/``reduction`` say theirs, comparisons give bool, other ops keep their operands'
dtype. It raises :class:`DtypeRuleError` when a body breaks a rule a code generator relies on
(binary operands of one dtype, bool conditions and logical operands, floating-only math, stores of
the buffer's dtype). ``Program.check()`` runs it; a backend can use it to learn each value's type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import sympy
import torch

from inductor_ir.ops_handler import OP_NAMES

__all__ = ["DtypeHandler", "DtypeRuleError"]

_COMPARISONS = {"eq", "ne", "lt", "le", "gt", "ge"}
_LOGICAL = {"logical_and", "logical_or", "logical_xor"}
_FLOAT_ONLY = {
    "truediv", "pow", "atan2", "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "erf", "erfc", "lgamma", "sigmoid", "floor", "ceil", "trunc", "round",
}  # fmt: skip
_PREDICATES = {"isnan", "isinf", "signbit"}
_SHIFTS = {"left_shift", "right_shift"}


class DtypeRuleError(TypeError):
    """A body broke one of the OpsHandler dtype rules."""


class DtypeHandler:
    """Propagates dtypes through ops calls; ``dtypes`` maps buffer names to their dtypes."""

    def __init__(self, dtypes: Mapping[str, torch.dtype]) -> None:
        self.dtypes = dtypes
        self._indirect = 0

    def _fail(self, message: str) -> None:
        raise DtypeRuleError(message)

    def load(self, name: str, index: sympy.Expr) -> torch.dtype:
        """The buffer's dtype."""
        return self.dtypes[name]

    def store(self, name: str, index: sympy.Expr, value: torch.dtype, mode: str | None = None) -> None:
        """Checks the stored value has the buffer's dtype."""
        if value != self.dtypes[name]:
            self._fail(f"store of {value} into {name} ({self.dtypes[name]})")

    def store_reduction(self, name: str, index: sympy.Expr, value: torch.dtype) -> None:
        """Checks the reduced value has the buffer's dtype."""
        self.store(name, index, value)

    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: torch.dtype) -> Any:
        """``dtype`` (a triple of it for the welford kinds); the value must be of ``src_dtype``."""
        if reduction_type == "welford_combine":
            if not (isinstance(value, tuple) and len(value) == 3 and all(v == src_dtype for v in value)):
                self._fail(f"welford_combine of {value}: a (mean, m2, weight) triple of {src_dtype}")
            return (dtype, dtype, dtype)
        if value != src_dtype:
            self._fail(f"{reduction_type} reduction of a {value} value declared {src_dtype}")
        if reduction_type == "welford_reduce":
            if not (src_dtype.is_floating_point and dtype.is_floating_point):
                self._fail(f"welford_reduce of {src_dtype} into {dtype}: floating dtypes only")
            return (dtype, dtype, dtype)
        return dtype

    def indirect_indexing(self, x: torch.dtype, size: sympy.Expr, check: bool = True, wrap_neg: bool = True) -> sympy.Symbol:
        """A fresh symbol; ``x`` must be an integer."""
        if x.is_floating_point or x == torch.bool:
            self._fail(f"indirect indexing by a {x} value")
        self._indirect += 1
        return sympy.Symbol(f"indirect{self._indirect}", integer=True)

    def masked(self, mask: torch.dtype, body: Callable[[], torch.dtype], other: Any) -> torch.dtype:
        """The body's dtype; the mask must be bool."""
        if mask != torch.bool:
            self._fail(f"masked by a {mask} mask")
        return body()

    def constant(self, value: Any, dtype: torch.dtype) -> torch.dtype:
        """``dtype``."""
        return dtype

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> torch.dtype:
        """``dtype``."""
        return dtype

    def to_dtype(self, x: torch.dtype, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> torch.dtype:
        """``dtype``; ``src_dtype``, when given, must be ``x``'s."""
        if src_dtype is not None and src_dtype != x:
            self._fail(f"to_dtype declares source {src_dtype} for a {x} value")
        return dtype

    def where(self, condition: torch.dtype, a: torch.dtype, b: torch.dtype) -> torch.dtype:
        """``a``'s dtype; condition bool, branches alike."""
        if condition != torch.bool or a != b:
            self._fail(f"where({condition}, {a}, {b})")
        return a

    def rand(self, seed: torch.dtype, offset: torch.dtype) -> torch.dtype:
        """float32."""
        return torch.float32

    def randn(self, seed: torch.dtype, offset: torch.dtype) -> torch.dtype:
        """float32."""
        return torch.float32


def _rule(op_name: str) -> Callable[..., torch.dtype]:
    def method(self: DtypeHandler, *args: torch.dtype) -> torch.dtype:
        first = args[0]
        if len(args) == 2 and op_name not in _SHIFTS and args[0] != args[1]:
            self._fail(f"{op_name} of {args[0]} and {args[1]}")
        if op_name in _LOGICAL or op_name == "logical_not":
            if any(a != torch.bool for a in args):
                self._fail(f"{op_name} of {args}: logical ops take bool")
            return torch.bool
        if op_name in _FLOAT_ONLY and not first.is_floating_point:
            self._fail(f"{op_name} of {first}: floating dtypes only")
        if op_name in _COMPARISONS or op_name in _PREDICATES:
            return torch.bool
        return first

    method.__name__ = op_name
    method.__doc__ = f"dtype rule of ``ops.{op_name}``."
    return method


for _name in OP_NAMES:
    if not hasattr(DtypeHandler, _name):
        setattr(DtypeHandler, _name, _rule(_name))
