"""The arithmetic and math part of the Triton ops handler: one Triton expression per `ops.*` call.

`TritonMathOps` is a mixin of `KernelWriter`: each method builds an expression from its operands'
variable names and hands it to `self.emit(...)`, which writes `tmpN = <expr>` (or reuses an equal
earlier line). Float16/bfloat16 values are held in float32, so math never sees half types.
Math that `triton.language` lacks goes through `libdevice` (the real one on a GPU, NumPy stand-ins
under the interpreter: see `codegen_triton.runtime.interpret_math`).
"""

from __future__ import annotations

import math

import torch

from codegen_triton.codegen.values import TritonValue, compute_dtype, is_float, triton_type, wrapped_in_int32

__all__ = ["TritonMathOps", "constant_literal"]

V = TritonValue


def _divide(dtype: torch.dtype) -> str:
    """The template of a correctly rounded float division ``{a} / {b}`` of values of `dtype`:
    Triton's float32 `/` is the approximate `div.full.f32`; float64's is already exact."""
    if dtype == torch.float64 or not is_float(dtype):
        return "{a} / {b}"
    return "tl.math.div_rn(({a}).to(tl.float32), ({b}).to(tl.float32))"


def constant_literal(value: bool | int | float, dtype: torch.dtype) -> str:
    """Python source of a scalar constant as Triton accepts it (inf and nan included)."""
    if dtype == torch.bool:
        return "1" if value else "0"
    if is_float(dtype):
        number = float(value)
        if math.isnan(number):
            return 'float("nan")'
        if math.isinf(number):
            return 'float("inf")' if number > 0 else 'float("-inf")'
        return repr(number)
    return str(int(value))


_NARROW = (torch.int8, torch.int16)
_UNSIGNED = {torch.int8: "tl.uint8", torch.int16: "tl.uint16", torch.int32: "tl.uint32", torch.int64: "tl.uint64"}


def _wrapping(operator: str, a: V, b: V) -> str:
    """The template of ``{a} <operator> {b}``; for signed integers of one dtype, computed on their
    unsigned bit patterns: Triton's signed overflow is undefined (LLVM may widen an int16 product
    feeding an int64 sum, as if nothing wrapped) where eager's integers wrap."""
    unsigned = _UNSIGNED.get(a.dtype)
    if unsigned is None or b.dtype != a.dtype:
        return "{a} " + operator + " {b}"
    signed = triton_type(a.dtype)
    if a.dtype in _NARROW:
        return wrapped_in_int32(f"{{a}}.to(tl.int32) {operator} {{b}}.to(tl.int32)", a.dtype)
    return f"({{a}}.to({unsigned}, bitcast=True) {operator} {{b}}.to({unsigned}, bitcast=True)).to({signed}, bitcast=True)"


class TritonMathOps:
    """Arithmetic, comparison, logical and math ops of the `OpsHandler` vocabulary, as Triton source."""

    def emit(self, expr: str, dtype: torch.dtype, axes: frozenset[str]) -> TritonValue:  # pragma: no cover
        """Write `tmpN = expr` into the current block (implemented by `KernelWriter`)."""
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------------------------
    def _unary(self, template: str, x: V, dtype: torch.dtype | None = None) -> V:
        return self.emit(template.format(x=x.name), dtype or x.dtype, x.axes)

    def _binary(self, template: str, a: V, b: V, dtype: torch.dtype | None = None) -> V:
        return self.emit(template.format(a=a.name, b=b.name), dtype or a.dtype, a.axes | b.axes)

    def _bool(self, template: str, a: V, b: V) -> V:
        return self._binary(template, a, b, torch.bool)

    # -- arithmetic ---------------------------------------------------------------------------
    def add(self, a: V, b: V) -> V:
        """a + b (signed integers wrap)."""
        return self._binary(_wrapping("+", a, b), a, b)

    def sub(self, a: V, b: V) -> V:
        """a - b (signed integers wrap)."""
        return self._binary(_wrapping("-", a, b), a, b)

    def mul(self, a: V, b: V) -> V:
        """a * b (signed integers wrap)."""
        if a.dtype == torch.bool:
            return self._binary("{a} & {b}", a, b)
        return self._binary(_wrapping("*", a, b), a, b)

    def truediv(self, a: V, b: V) -> V:
        """a / b as eager computes it: correctly rounded (Triton's float32 `/` is `div.full.f32`, up
        to 2 ulp off: 4.6875 / 0.9375 gave 5.0000005, and trunc(x / x) 0); on a GPU, a constant
        divisor as eager's CUDA kernel takes a CPU scalar: times its reciprocal, rounded once in the
        computation dtype."""
        divisor = self.literal_of(b)
        if not self.interpret and is_float(a.dtype) and isinstance(divisor, (int, float)) and divisor != 0:  # type: ignore[attr-defined]
            opmath = torch.float64 if a.dtype == torch.float64 else torch.float32
            reciprocal = (torch.tensor(1.0, dtype=opmath) / torch.tensor(float(divisor), dtype=opmath)).item()
            return self._binary("{a} * {b}", a, self.constant(reciprocal, a.dtype))  # type: ignore[attr-defined]
        return self._binary(_divide(a.dtype), a, b)

    def floordiv(self, a: V, b: V) -> V:
        """a // b toward negative infinity (Triton's integer `//` truncates, so it is corrected)."""
        if is_float(a.dtype):
            return self._float_floordiv(a, b)
        a, b = self._int32_held(a), self._int32_held(b)
        quotient = self._binary("{a} // {b}", a, b)
        fix = "(({a} % {b}) != 0) & (({a} < 0) != ({b} < 0))"
        correction = self._binary(fix, a, b, torch.bool)
        held = "tl.int32" if a.dtype in _NARROW else triton_type(a.dtype)
        return self._wrap_narrow(self.emit(f"{quotient} - {correction}.to({held})", a.dtype, a.axes | b.axes))

    def _int32_held(self, x: V) -> V:
        """An int8/int16 operand as int32 (``-128 // -1`` is 128 there, wrapped after)."""
        return self._unary("{x}.to(tl.int32)", x) if x.dtype in _NARROW else x

    def _wrap_narrow(self, x: V) -> V:
        """An int8/int16 result computed in int32, wrapped into its dtype's range (see `values.wrapped_in_int32`)."""
        return self._unary(wrapped_in_int32("{x}", x.dtype), x) if x.dtype in _NARROW else x

    def _float_floordiv(self, a: V, b: V) -> V:
        """Float a // b as eager computes it, from the exact fmod rather than floor(a / b), which
        differs where the quotient rounds or overflows (inf // 100 is nan, -1 // inf is -1)."""
        mod = self._binary("libdevice.fmod({a}, {b})", a, b)
        difference = self._binary(f"{{a}} - {mod.name}", a, b)
        div = self._binary(_divide(a.dtype).replace("{a}", difference.name), a, b)
        fix = f"({mod.name} != 0) & (({{b}} < 0) != ({mod.name} < 0))"
        div = self._binary(f"tl.where({fix}, {div.name} - 1, {div.name})", a, b)
        floored = self.emit(f"tl.floor({div.name})", a.dtype, div.axes)
        rounded = f"tl.where({div.name} - {floored.name} > 0.5, {floored.name} + 1, {floored.name})"
        zero = self._binary(f"({_divide(a.dtype)}) * 0.0", a, b)  # a zero with the sign of a / b
        nonzero = f"tl.where({div.name} == 0, {zero.name}, {rounded})"
        return self._binary(f"tl.where({{b}} == 0, {_divide(a.dtype)}, {nonzero})", a, b)

    def truncdiv(self, a: V, b: V) -> V:
        """a / b toward zero."""
        if is_float(a.dtype):
            return self._binary(f"libdevice.trunc({_divide(a.dtype)})", a, b)
        return self._wrap_narrow(self._binary("{a} // {b}", self._int32_held(a), self._int32_held(b)))

    def remainder(self, a: V, b: V) -> V:
        """a % b with the sign of b: the remainder of a truncating division, moved into b's sign.

        Floats take the exact fmod, as eager does (fmod, then `+ b` where the signs differ):
        `a - floor(a / b) * b` rounds the quotient and loses the low bits, all of them once
        |a / b| is beyond 2**24 (1e30 % -129 gave 0.0, eager -3.0).
        """
        rem = self._binary("libdevice.fmod({a}, {b})" if is_float(a.dtype) else "{a} % {b}", a, b)
        fixed = f"tl.where(({rem} != 0) & (({rem} < 0) != ({b.name} < 0)), {rem} + {b.name}, {rem})"
        return self.emit(fixed, a.dtype, a.axes | b.axes)

    def fmod(self, a: V, b: V) -> V:
        """a % b with the sign of a."""
        if is_float(a.dtype):
            return self._binary("libdevice.fmod({a}, {b})", a, b)
        return self._binary("{a} % {b}", a, b)

    def literal_of(self, value: V) -> bool | int | float | None:
        """The Python value of a constant (`KernelWriter` records them), else None."""
        return None

    def pow(self, a: V, b: V) -> V:
        """a ** b (x * x and x * x * x for the exponents 2 and 3, like eager's CUDA kernels; x itself
        for the exponent 1, which a square's gradient `2 * x ** 1` reads)."""
        exponent = self.literal_of(b)
        if is_float(a.dtype) and exponent == 1 and not isinstance(exponent, bool):
            return a
        if is_float(a.dtype) and exponent in (2, 3) and not isinstance(exponent, bool):
            square = self._binary("{a} * {b}", a, a)
            return square if exponent == 2 else self._binary("{a} * {b}", square, a)
        return self._binary("libdevice.pow({a}, {b})", a, b)

    def maximum(self, a: V, b: V) -> V:
        """Elementwise max, NaN-propagating."""
        if is_float(a.dtype):
            return self._binary("tl.maximum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)", a, b)
        return self._binary("tl.maximum({a}, {b})", a, b)

    def minimum(self, a: V, b: V) -> V:
        """Elementwise min, NaN-propagating."""
        if is_float(a.dtype):
            return self._binary("tl.minimum({a}, {b}, propagate_nan=tl.PropagateNan.ALL)", a, b)
        return self._binary("tl.minimum({a}, {b})", a, b)

    def atan2(self, a: V, b: V) -> V:
        """atan2(a, b)."""
        return self._binary("libdevice.atan2({a}, {b})", a, b)

    def neg(self, x: V) -> V:
        """-x; of a float, ``x * -1.0``: Triton's ``-x`` is ``0 - x``, +0.0 where eager gives -0.0."""
        if is_float(x.dtype):
            return self._unary("{x} * -1.0", x)
        if x.dtype in _NARROW:  # -INT_MIN wraps to INT_MIN, as in eager (see `_wrapping`)
            return self._unary(wrapped_in_int32("0 - {x}.to(tl.int32)", x.dtype), x)
        if x.dtype in _UNSIGNED:
            return self._unary(f"(0 - {{x}}.to({_UNSIGNED[x.dtype]}, bitcast=True)).to({triton_type(x.dtype)}, bitcast=True)", x)
        return self._unary("-{x}", x)

    def abs(self, x: V) -> V:
        """|x| (of an int8/int16, computed in int32 and wrapped: |-128| is -128)."""
        return self._wrap_narrow(self._unary("tl.abs({x})", self._int32_held(x)))

    def reciprocal(self, x: V) -> V:
        """1 / x."""
        return self._unary("1.0 / {x}", x)

    def sign(self, x: V) -> V:
        """-1, 0 or 1 in x's dtype; NaN gives 0, as eager's CPU kernel (`(0 < x) - (x < 0)`)."""
        ty = triton_type(compute_dtype(x.dtype))
        if x.dtype == torch.bool:
            return x
        return self.emit(f"(0 < {x.name}).to({ty}) - ({x.name} < 0).to({ty})", x.dtype, x.axes)

    # -- math ---------------------------------------------------------------------------------
    def exp(self, x: V) -> V:
        """e ** x."""
        return self._unary("tl.exp({x})", x)

    def exp2(self, x: V) -> V:
        """2 ** x."""
        return self._unary("tl.exp2({x})", x)

    def expm1(self, x: V) -> V:
        """e ** x - 1."""
        return self._unary("libdevice.expm1({x})", x)

    def log(self, x: V) -> V:
        """Natural log."""
        return self._unary("tl.log({x})", x)

    def log2(self, x: V) -> V:
        """Base-2 log."""
        return self._unary("tl.log2({x})", x)

    def log10(self, x: V) -> V:
        """Base-10 log."""
        return self._unary("libdevice.log10({x})", x)

    def log1p(self, x: V) -> V:
        """log(1 + x)."""
        return self._unary("libdevice.log1p({x})", x)

    def sqrt(self, x: V) -> V:
        """Square root."""
        return self._unary("tl.sqrt({x})", x)

    def rsqrt(self, x: V) -> V:
        """1 / sqrt(x)."""
        return self._unary("tl.rsqrt({x})", x)

    def sin(self, x: V) -> V:
        """Sine."""
        return self._unary("tl.sin({x})", x)

    def cos(self, x: V) -> V:
        """Cosine."""
        return self._unary("tl.cos({x})", x)

    def tan(self, x: V) -> V:
        """Tangent."""
        return self._unary("libdevice.tan({x})", x)

    def asin(self, x: V) -> V:
        """Arc sine."""
        return self._unary("libdevice.asin({x})", x)

    def acos(self, x: V) -> V:
        """Arc cosine."""
        return self._unary("libdevice.acos({x})", x)

    def atan(self, x: V) -> V:
        """Arc tangent."""
        return self._unary("libdevice.atan({x})", x)

    def sinh(self, x: V) -> V:
        """Hyperbolic sine."""
        return self._unary("libdevice.sinh({x})", x)

    def cosh(self, x: V) -> V:
        """Hyperbolic cosine."""
        return self._unary("libdevice.cosh({x})", x)

    def tanh(self, x: V) -> V:
        """Hyperbolic tangent."""
        return self._unary("libdevice.tanh({x})", x)

    def asinh(self, x: V) -> V:
        """Inverse hyperbolic sine."""
        return self._unary("libdevice.asinh({x})", x)

    def acosh(self, x: V) -> V:
        """Inverse hyperbolic cosine."""
        return self._unary("libdevice.acosh({x})", x)

    def atanh(self, x: V) -> V:
        """Inverse hyperbolic tangent."""
        return self._unary("libdevice.atanh({x})", x)

    def erf(self, x: V) -> V:
        """Error function."""
        return self._unary("tl.erf({x})", x)

    def erfc(self, x: V) -> V:
        """1 - erf(x)."""
        return self._unary("libdevice.erfc({x})", x)

    def lgamma(self, x: V) -> V:
        """log |Gamma(x)|."""
        return self._unary("libdevice.lgamma({x})", x)

    def sigmoid(self, x: V) -> V:
        """1 / (1 + e ** -x)."""
        return self._unary("tl.sigmoid({x})", x)

    def relu(self, x: V) -> V:
        """max(x, 0); NaN stays NaN."""
        return self._unary("tl.where({x} < 0, tl.zeros_like({x}), {x})", x)

    def floor(self, x: V) -> V:
        """Round down."""
        return self._unary("tl.floor({x})", x)

    def ceil(self, x: V) -> V:
        """Round up."""
        return self._unary("tl.ceil({x})", x)

    def trunc(self, x: V) -> V:
        """Round toward zero."""
        return self._unary("libdevice.trunc({x})", x)

    def round(self, x: V) -> V:
        """Round half to even."""
        return self._unary("libdevice.nearbyint({x})", x)

    def isnan(self, x: V) -> V:
        """x != x."""
        if not is_float(x.dtype):
            return self._unary("tl.zeros_like({x}) != 0", x, torch.bool)
        return self._unary("{x} != {x}", x, torch.bool)

    def isinf(self, x: V) -> V:
        """|x| == inf."""
        if not is_float(x.dtype):
            return self._unary("tl.zeros_like({x}) != 0", x, torch.bool)
        return self._unary('tl.abs({x}) == float("inf")', x, torch.bool)

    def signbit(self, x: V) -> V:
        """Sign bit set (also for -0.0)."""
        if not is_float(x.dtype):
            return self._unary("{x} < 0", x, torch.bool)
        return self._unary("libdevice.signbit({x}) != 0", x, torch.bool)

    # -- comparisons --------------------------------------------------------------------------
    def eq(self, a: V, b: V) -> V:
        """a == b."""
        return self._bool("{a} == {b}", a, b)

    def ne(self, a: V, b: V) -> V:
        """a != b."""
        return self._bool("{a} != {b}", a, b)

    def lt(self, a: V, b: V) -> V:
        """a < b."""
        return self._bool("{a} < {b}", a, b)

    def le(self, a: V, b: V) -> V:
        """a <= b."""
        return self._bool("{a} <= {b}", a, b)

    def gt(self, a: V, b: V) -> V:
        """a > b."""
        return self._bool("{a} > {b}", a, b)

    def ge(self, a: V, b: V) -> V:
        """a >= b."""
        return self._bool("{a} >= {b}", a, b)

    # -- logical and bitwise ------------------------------------------------------------------
    def logical_and(self, a: V, b: V) -> V:
        """a and b."""
        return self._bool("{a} & {b}", a, b)

    def logical_or(self, a: V, b: V) -> V:
        """a or b."""
        return self._bool("{a} | {b}", a, b)

    def logical_xor(self, a: V, b: V) -> V:
        """a xor b."""
        return self._bool("{a} ^ {b}", a, b)

    def logical_not(self, x: V) -> V:
        """not x."""
        return self._unary("{x} == 0", x, torch.bool)

    def bitwise_and(self, a: V, b: V) -> V:
        """a & b."""
        return self._binary("{a} & {b}", a, b)

    def bitwise_or(self, a: V, b: V) -> V:
        """a | b."""
        return self._binary("{a} | {b}", a, b)

    def bitwise_xor(self, a: V, b: V) -> V:
        """a ^ b."""
        return self._binary("{a} ^ {b}", a, b)

    def bitwise_not(self, x: V) -> V:
        """~x (not for bool); for uint8, ``x ^ 0xFF`` (Triton's interpreter cannot invert unsigned
        values: it builds the all-ones operand as -1)."""
        if x.dtype == torch.bool:
            return self._unary("{x} == 0", x, torch.bool)
        if x.dtype == torch.uint8:
            return self._unary("({x} ^ 255).to(tl.uint8)", x)
        return self._unary("~{x}", x)

    def left_shift(self, a: V, b: V) -> V:
        """a << b (of an int8/int16, computed in int32 and wrapped)."""
        return self._wrap_narrow(self._binary("{a} << {b}", self._int32_held(a), b))

    def right_shift(self, a: V, b: V) -> V:
        """a >> b."""
        return self._binary("{a} >> {b}", a, b)
