"""The arithmetic, math, comparison, logical and bitwise ops of the C++ handler.

Each op prints one C++ expression that reads the same in scalar and vector code (``kiln::`` has
overloads for both); where the two differ (``&&`` vs ``&`` for bool masks) the op checks
``self.vector``. :class:`codegen_cpp.codegen.handler.CppOpsHandler` supplies the helpers.

int8, uint8 and int16 values are computed in int32 (C++ promotes them anyway, and vectors of int32
are what the lanes hold); every op whose result may leave the dtype's range (``+ - * // << ~``,
negation, ``abs``, ``pow``) wraps it back, as eager's kernels compute in the narrow type: a
fused ``(u8 * 2) // 3`` must divide the wrapped product, not the int32 one.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable

import sympy
import torch

from codegen_cpp.codegen.dtypes import cpp_dtype
from codegen_cpp.codegen.values import CppValue, KernelState

__all__ = ["ArithmeticOps"]


def _exact_reciprocal(literal: str | None) -> bool:
    """Whether ``literal`` is a C++ float literal whose reciprocal is exact and normal (2**k, |k| < 120)."""
    if literal is None:
        return False
    try:
        value = float(literal.removesuffix("f"))
    except ValueError:
        return False  # a variable, or numeric_limits' inf/nan
    mantissa, exponent = math.frexp(value)
    return abs(mantissa) == 0.5 and abs(exponent) < 120

_UNARY_MATH = (
    "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh "
    "asinh acosh atanh erf erfc lgamma sigmoid floor ceil trunc round reciprocal"
).split()
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
_MIRRORED = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}
_MULTIPLY_POWERS = (-2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0)
# Narrow ints held in int32 (codegen/dtypes.py): (mask of their bits, sign bit or 0 if unsigned).
_NARROW_INTS: dict[torch.dtype, tuple[int, int]] = {
    torch.uint8: (0xFF, 0),
    torch.int8: (0xFF, 0x80),
    torch.int16: (0xFFFF, 0x8000),
}
_NUMBER_LITERAL = re.compile(r"(?:INT64_C\()?(-?[0-9]+(?:\.[0-9]*)?(?:e[-+]?[0-9]+)?)f?\)?")


class ArithmeticOps:
    """Ops computed from values alone (no memory, no loops)."""

    state: KernelState

    @property
    def vector(self) -> bool:
        """Whether values are vectors."""
        raise NotImplementedError

    def _emit(
        self, expr: str, dtype: torch.dtype, vector: bool | None = None, uniform: str | None = None
    ) -> CppValue:
        raise NotImplementedError

    def _lift(self, value: CppValue) -> str:
        raise NotImplementedError

    def constant(self, value: bool | int | float, dtype: torch.dtype) -> CppValue:
        """A literal."""
        raise NotImplementedError

    def to_dtype(self, x: CppValue, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> CppValue:
        """A cast."""
        raise NotImplementedError

    def _is_float(self, value: CppValue) -> bool:
        return value.dtype.is_floating_point

    def _wrapped(self, value: CppValue) -> CppValue:
        """``value`` wrapped into its dtype's range when that dtype is a narrow int held in int32.

        Two's complement by masks: ``x & 0xFF`` (uint8), ``((x & 0xFF) ^ 0x80) - 0x80`` (int8). No
        C++ undefined behaviour, the same text for scalars and vectors, and cheaper to compile and
        run than converting vectors to 8-bit lanes and back.
        """
        if value.dtype not in _NARROW_INTS:
            return value
        mask, sign = _NARROW_INTS[value.dtype]
        vector = value.vector
        vector_type = cpp_dtype(value.dtype).vector

        def literal(number: int) -> str:
            return f"kiln::splat<{vector_type}>({number})" if vector else str(number)

        text = f"({value.name} & {literal(mask)})"
        if sign:
            text = f"(({text} ^ {literal(sign)}) - {literal(sign)})"
        if self.vector and not vector:  # a scalar computed once in vector code: stays one
            return self._scalar_value(text, value.dtype)
        return self._emit(text, value.dtype, vector=vector)

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, op: str, a: CppValue, b: CppValue, dtype: torch.dtype | None = None) -> CppValue:
        dtype = dtype or a.dtype
        if op in "+-*" and self._scalar_form((a, b), dtype):
            text = f"({self._scalar_arg(a)} {op} {self._scalar_arg(b)})"
            result = self._scalar_value(text, dtype)
        else:
            result = self._emit(f"({self._lift(a)} {op} {self._lift(b)})", dtype)
        known = self.state.symbolic
        if op in "+-*" and a.name in known and b.name in known and dtype in (torch.int64, torch.int32):
            x, y = known[a.name], known[b.name]
            known[result.name] = sympy.expand(x + y if op == "+" else x - y if op == "-" else x * y)
        return result

    def _scalar_form(self, args: tuple[CppValue, ...], dtype: torch.dtype) -> bool:
        """Whether a vector op on ``args`` is computed once, as a scalar: every argument is equal
        in all lanes (constants, broadcast loads, lane-invariant indices). Float values in a loop
        whose values are shared with a later loop (codegen/reuse.py) stay vectors."""
        if not self.vector or not all(a.uniform for a in args):
            return False
        integral = all(not a.dtype.is_floating_point for a in args) and not dtype.is_floating_point
        return integral or getattr(self, "reuse", None) is None

    @staticmethod
    def _scalar_arg(value: CppValue) -> str:
        return f"static_cast<{cpp_dtype(value.dtype).scalar}>({value.uniform})"

    def _scalar_value(self, expr: str, dtype: torch.dtype) -> CppValue:
        """A scalar temporary in vector code; it is splatted where a vector op uses it."""
        value = self._emit(expr, dtype, vector=False)
        return dataclasses.replace(value, uniform=value.name)

    def _call(self, function: str, *args: CppValue, dtype: torch.dtype | None = None) -> CppValue:
        dtype = dtype or args[0].dtype
        if self._scalar_form(args, dtype):
            return self._scalar_value(f"{function}({', '.join(self._scalar_arg(a) for a in args)})", dtype)
        text = ", ".join(self._lift(a) for a in args)
        return self._emit(f"{function}({text})", dtype)

    def add(self, a: CppValue, b: CppValue) -> CppValue:
        """a + b (or for bool)."""
        return self.logical_or(a, b) if a.dtype == torch.bool else self._wrapped(self._binary("+", a, b))

    def sub(self, a: CppValue, b: CppValue) -> CppValue:
        """a - b."""
        return self._wrapped(self._binary("-", a, b))

    def mul(self, a: CppValue, b: CppValue) -> CppValue:
        """a * b (and for bool)."""
        return self.logical_and(a, b) if a.dtype == torch.bool else self._wrapped(self._binary("*", a, b))

    def truediv(self, a: CppValue, b: CppValue) -> CppValue:
        """a / b; by a literal power of two, a multiplication by its (exact) reciprocal.

        Only there: eager divides, and a * (1 / b) is one ulp off for a third of the values, inf
        where 1 / b overflows (a subnormal b) and imprecise where it is subnormal (b near the max).
        """
        if self.vector and _exact_reciprocal(b.uniform) and a.dtype in (torch.float32, torch.float64):
            one = "1.0f" if a.dtype == torch.float32 else "1.0"
            reciprocal = self._emit(f"kiln::splat<{cpp_dtype(a.dtype).vector}>({one} / {b.uniform})", a.dtype)
            return self._binary("*", a, reciprocal)
        return self._binary("/", a, b)

    def floordiv(self, a: CppValue, b: CppValue) -> CppValue:
        """a // b, rounding toward negative infinity."""
        return self._wrapped(self._call("kiln::floordiv", a, b))  # int8: -128 // -1

    def truncdiv(self, a: CppValue, b: CppValue) -> CppValue:
        """a / b, rounding toward zero."""
        if self._is_float(a):
            return self._emit(f"kiln::trunc({self._lift(a)} / {self._lift(b)})", a.dtype)
        return self._wrapped(self._call("kiln::truncdiv", a, b))

    def remainder(self, a: CppValue, b: CppValue) -> CppValue:
        """Python a % b."""
        return self._call("kiln::floormod", a, b)

    def fmod(self, a: CppValue, b: CppValue) -> CppValue:
        """C fmod(a, b); for int32/int64, ``kiln::fmod`` (x86 traps on ``min % -1``)."""
        if self._is_float(a) or a.dtype in (torch.int32, torch.int64):
            return self._call("kiln::fmod", a, b)
        return self._binary("%", a, b)

    def pow(self, a: CppValue, b: CppValue) -> CppValue:
        """a ** b; a float raised to a small integer constant is a chain of multiplications
        (GELU's ``x ** 3``): ``kiln::pow`` calls ``std::pow`` per lane. ``** 0.5`` stays pow: it is
        not sqrt at -0.0 and -inf, and where eager takes sqrt, inductor_ir's lowering says so."""
        exponent = self._float_constant(b)
        if self._is_float(a) and exponent is not None and exponent in _MULTIPLY_POWERS:
            return self._power_by_multiplication(a, int(exponent))
        return self._wrapped(self._call("kiln::pow", a, b))

    def _power_by_multiplication(self, a: CppValue, exponent: int) -> CppValue:
        if exponent == 0:
            return self.constant(1.0, a.dtype)
        if exponent < 0:
            return self.truediv(self.constant(1.0, a.dtype), self._power_by_multiplication(a, -exponent))
        result = a
        for _ in range(exponent - 1):
            result = self._binary("*", result, a)
        return result

    def _float_constant(self, value: CppValue) -> float | None:
        """The number a value stands for when it is a float literal (a constant op), else None."""
        text = value.uniform if value.vector else None
        if text is None:
            text = self.state.canonical.get(value.name, "")
        match = _NUMBER_LITERAL.fullmatch(text.strip("()")) if text else None
        return float(match.group(1)) if match else None

    def maximum(self, a: CppValue, b: CppValue) -> CppValue:
        """max(a, b), NaN-propagating."""
        return self.logical_or(a, b) if a.dtype == torch.bool else self._call("kiln::maximum", a, b)

    def minimum(self, a: CppValue, b: CppValue) -> CppValue:
        """min(a, b), NaN-propagating."""
        return self.logical_and(a, b) if a.dtype == torch.bool else self._call("kiln::minimum", a, b)

    def atan2(self, a: CppValue, b: CppValue) -> CppValue:
        """atan2(a, b)."""
        return self._call("kiln::atan2", a, b)

    def neg(self, x: CppValue) -> CppValue:
        """-x."""
        return self._wrapped(self._emit(f"(-{self._lift(x)})", x.dtype))

    def abs(self, x: CppValue) -> CppValue:
        """|x| (int8: |-128| wraps to -128, as in eager)."""
        return x if x.dtype == torch.bool else self._wrapped(self._call("kiln::fabs", x))

    def sign(self, x: CppValue) -> CppValue:
        """-1, 0 or 1."""
        return x if x.dtype == torch.bool else self._call("kiln::sign", x)

    def relu(self, x: CppValue) -> CppValue:
        """max(0, x): x where it is 0 (-0.0 stays -0.0, as eager's) or NaN."""
        return self.maximum(self.constant(0, x.dtype), x)

    def isnan(self, x: CppValue) -> CppValue:
        """x != x."""
        if not self._is_float(x):
            return self.constant(False, torch.bool)
        return self._call("kiln::isnan", x, dtype=torch.bool)

    def isinf(self, x: CppValue) -> CppValue:
        """|x| == inf."""
        if not self._is_float(x):
            return self.constant(False, torch.bool)
        return self._call("kiln::isinf", x, dtype=torch.bool)

    def signbit(self, x: CppValue) -> CppValue:
        """Sign bit set (also -0.0)."""
        if x.dtype == torch.bool:
            return self.constant(False, torch.bool)
        return self._call("kiln::signbit", x, dtype=torch.bool)

    # ------------------------------------------------------------------ logical and bitwise
    def logical_and(self, a: CppValue, b: CppValue) -> CppValue:
        """a and b."""
        a, b = self._as_bool(a), self._as_bool(b)
        if self._scalar_form((a, b), torch.bool):
            return self._scalar_value(f"({self._scalar_arg(a)} && {self._scalar_arg(b)})", torch.bool)
        return self._binary("&" if self.vector else "&&", a, b, torch.bool)

    def logical_or(self, a: CppValue, b: CppValue) -> CppValue:
        """a or b."""
        a, b = self._as_bool(a), self._as_bool(b)
        if self._scalar_form((a, b), torch.bool):
            return self._scalar_value(f"({self._scalar_arg(a)} || {self._scalar_arg(b)})", torch.bool)
        return self._binary("|" if self.vector else "||", a, b, torch.bool)

    def logical_xor(self, a: CppValue, b: CppValue) -> CppValue:
        """a xor b."""
        a, b = self._as_bool(a), self._as_bool(b)
        return self._binary("^" if self.vector else "!=", a, b, torch.bool)

    def logical_not(self, x: CppValue) -> CppValue:
        """not x."""
        x = self._as_bool(x)
        if self._scalar_form((x,), torch.bool):
            return self._scalar_value(f"(!{self._scalar_arg(x)})", torch.bool)
        return self._emit(f"({'~' if self.vector else '!'}{self._lift(x)})", torch.bool)

    def _as_bool(self, x: CppValue) -> CppValue:
        return x if x.dtype == torch.bool else self.to_dtype(x, torch.bool, x.dtype)

    def bitwise_and(self, a: CppValue, b: CppValue) -> CppValue:
        """a & b."""
        if a.dtype == torch.bool and b.dtype == torch.bool:
            return self.logical_and(a, b)
        return self._binary("&", a, b)

    def bitwise_or(self, a: CppValue, b: CppValue) -> CppValue:
        """a | b."""
        if a.dtype == torch.bool and b.dtype == torch.bool:
            return self.logical_or(a, b)
        return self._binary("|", a, b)

    def bitwise_xor(self, a: CppValue, b: CppValue) -> CppValue:
        """a ^ b."""
        if a.dtype == torch.bool and not self.vector:
            return self._binary("!=", a, b, torch.bool)
        return self._binary("^", a, b)

    def bitwise_not(self, x: CppValue) -> CppValue:
        """~x (not, for bool)."""
        if x.dtype == torch.bool:
            return self.logical_not(x)
        return self._wrapped(self._emit(f"(~{self._lift(x)})", x.dtype))  # uint8: ~0 is 255, not -1

    def left_shift(self, a: CppValue, b: CppValue) -> CppValue:
        """a << b."""
        return self._wrapped(self._binary("<<", a, b))

    def right_shift(self, a: CppValue, b: CppValue) -> CppValue:
        """a >> b (arithmetic for signed)."""
        return self._binary(">>", a, b)


def _install_simple_ops() -> None:
    def unary(name: str) -> Callable[[ArithmeticOps, CppValue], CppValue]:
        def op(self: ArithmeticOps, x: CppValue) -> CppValue:
            return self._call(f"kiln::{name}", x)

        op.__doc__ = f"kiln::{name}(x)."
        return op

    def comparison(name: str) -> Callable[[ArithmeticOps, CppValue, CppValue], CppValue]:
        def op(self: ArithmeticOps, a: CppValue, b: CppValue) -> CppValue:
            if self.vector and a.dtype == torch.bool and b.dtype == torch.bool and not self._scalar_form((a, b), torch.bool):
                # Vector bools are 0/-1 lane masks, so true < false there: order comparisons run mirrored.
                return self._call(f"kiln::{_MIRRORED.get(name, name)}", a, b, dtype=torch.bool)
            return self._call(f"kiln::{name}", a, b, dtype=torch.bool)

        op.__doc__ = f"kiln::{name}(a, b), as bool."
        return op

    for name in _UNARY_MATH:
        setattr(ArithmeticOps, name, unary(name))
    for name in _COMPARISONS:
        setattr(ArithmeticOps, name, comparison(name))


_install_simple_ops()
