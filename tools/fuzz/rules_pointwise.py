"""Grammar rules for pointwise ops: unary, binary (arithmetic, integer, bitwise, shifts, comparisons),
where/clamp/lerp-style ternaries and dtype casts.

A rule takes the `Builder`, proposes one statement with `Builder.try_add` and says whether it was
kept. Operand choice is where the interesting programs come from: the second operand of a binary
op is an existing value that broadcasts, a new input of a broadcastable shape (a 0-d tensor
included, which promotes differently), or a Python scalar.
"""

from __future__ import annotations

import ast

import torch

from tools.fuzz.builder import FLOATS, Builder, dtype_name

FLOAT_UNARY: tuple[tuple[str, str], ...] = (
    ("abs", "torch.abs({0})"), ("neg", "-{0}"), ("exp", "torch.exp({0})"), ("log", "torch.log({0})"),
    ("sqrt", "torch.sqrt({0})"), ("sin", "torch.sin({0})"), ("cos", "torch.cos({0})"), ("tanh", "torch.tanh({0})"),
    ("sigmoid", "torch.sigmoid({0})"), ("relu", "torch.relu({0})"), ("floor", "torch.floor({0})"),
    ("ceil", "torch.ceil({0})"), ("round", "torch.round({0})"), ("round_decimals", "torch.round({0}, decimals=1)"),
    ("trunc", "torch.trunc({0})"), ("sign", "torch.sign({0})"), ("reciprocal", "torch.reciprocal({0})"),
    ("rsqrt", "torch.rsqrt({0})"), ("expm1", "torch.expm1({0})"), ("log1p", "torch.log1p({0})"),
    ("erf", "torch.erf({0})"), ("square", "torch.square({0})"), ("frac", "torch.frac({0})"), ("gelu", "F.gelu({0})"),
    ("gelu_tanh", "F.gelu({0}, approximate='tanh')"), ("silu", "F.silu({0})"), ("softplus", "F.softplus({0})"),
    ("leaky_relu", "F.leaky_relu({0}, 0.1)"), ("hardtanh", "F.hardtanh({0})"), ("elu", "F.elu({0})"),
    ("nan_to_num", "torch.nan_to_num({0})"), ("isnan", "torch.isnan({0})"), ("isinf", "torch.isinf({0})"),
    ("signbit", "torch.signbit({0})"), ("pow2", "{0}.pow(2)"), ("pow3", "{0} ** 3"), ("pow_half", "{0} ** 0.5"),
    ("pow_neg", "{0} ** -1"), ("exp2", "torch.exp2({0})"), ("atan", "torch.atan({0})"), ("relu6", "F.relu6({0})"),
    ("sinh", "torch.sinh({0})"), ("hardswish", "F.hardswish({0})"), ("log2", "torch.log2({0})"),
    ("logical_not", "torch.logical_not({0})"), ("rpow", "2 ** {0}"), ("rsub", "1 - {0}"), ("rdiv", "1 / {0}"),
)
INT_UNARY: tuple[tuple[str, str], ...] = (
    ("abs", "torch.abs({0})"), ("neg", "-{0}"), ("bitwise_not", "~{0}"), ("square", "{0} * {0}"),
    ("sign", "torch.sign({0})"), ("pow2", "{0}.pow(2)"), ("pow3", "{0} ** 3"), ("logical_not", "torch.logical_not({0})"),
    ("relu", "torch.relu({0})"), ("sqrt", "torch.sqrt({0})"), ("exp", "torch.exp({0})"), ("sigmoid", "torch.sigmoid({0})"),
    ("rsub", "1 - {0}"), ("rdiv", "7 / {0}"), ("rfloordiv", "100 // torch.where({0} == 0, 1, {0})"),
)
BOOL_UNARY: tuple[tuple[str, str], ...] = (
    ("bitwise_not", "~{0}"), ("logical_not", "torch.logical_not({0})"), ("neg_cast", "-{0}.to(torch.int8)"),
)

# (name, template, is a division whose right side must not be an integer zero)
BINARY: tuple[tuple[str, str, bool], ...] = (
    ("add", "{0} + {1}", False), ("sub", "{0} - {1}", False), ("mul", "{0} * {1}", False),
    ("truediv", "{0} / {1}", False), ("floordiv", "{0} // {1}", True), ("remainder", "{0} % {1}", True),
    ("fmod", "torch.fmod({0}, {1})", True), ("div_trunc", "torch.div({0}, {1}, rounding_mode='trunc')", True),
    ("div_floor", "torch.div({0}, {1}, rounding_mode='floor')", True), ("maximum", "torch.maximum({0}, {1})", False),
    ("minimum", "torch.minimum({0}, {1})", False), ("fmax", "torch.fmax({0}, {1})", False),
    ("atan2", "torch.atan2({0}, {1})", False), ("eq", "{0} == {1}", False), ("ne", "{0} != {1}", False),
    ("lt", "{0} < {1}", False), ("le", "{0} <= {1}", False), ("gt", "{0} > {1}", False), ("ge", "{0} >= {1}", False),
    ("bitwise_and", "{0} & {1}", False), ("bitwise_or", "{0} | {1}", False), ("bitwise_xor", "{0} ^ {1}", False),
    ("logical_and", "torch.logical_and({0}, {1})", False), ("logical_xor", "torch.logical_xor({0}, {1})", False),
    ("add_alpha", "torch.add({0}, {1}, alpha=2)", False), ("sub_alpha", "torch.sub({0}, {1}, alpha=3)", False),
    ("copysign", "torch.copysign({0}, {1})", False), ("pow_tensor", "{0} ** {1}", False),
)
BINARY_WEIGHTS = {"add": 3.0, "sub": 2.0, "mul": 3.0, "truediv": 1.5, "floordiv": 1.5, "remainder": 1.5}

SAFE_DIVISOR = "torch.where({d} == 0, 1, {d})"
"""Integer divisors are kept off zero (eager raises there; that case has its own, rarer, rule)."""


def trapless_trunc_division(template: str, dividend: torch.Tensor, divisor: torch.Tensor | int) -> str:
    """`template` (a trunc division of ``{0}`` by ``{1}``) with its dividend kept off the smallest
    int32/int64 value of the division's dtype: eager's CPU kernel divides by the machine instruction,
    which traps on that value over -1 (SIGFPE: the process dies; floor division and remainders do
    not). The guard does not depend on the values, so the program stays safe at other sizes."""
    dtype = torch.result_type(dividend, divisor)
    if dtype not in (torch.int32, torch.int64):
        return template
    low = torch.iinfo(dtype).min + 1
    guarded = "{0}" if dividend.dtype == dtype else f"{{0}}.to({dtype})"
    return template.replace("{0}", f"{guarded}.clamp_min({low})", 1)


def _operand(b: Builder, x: str) -> tuple[str, str | None]:
    """A right-hand operand for `x`: (a name, None) or (None-name "", a scalar literal)."""
    xt = b.tensor(x)
    roll = b.rng.random()
    if roll < 0.3:
        return "", b.scalar(xt.dtype)
    if roll < 0.55:
        other = b.pick(lambda t: _broadcasts(t.shape, xt.shape))
        if other is not None:
            return other, None
    shape = () if b.rng.random() < 0.15 else b.broadcastable_to(tuple(xt.shape))
    same = b.rng.random() < 0.5
    return b.new_input(shape, dtype_name(xt.dtype) if same else None), None


def _broadcasts(a: torch.Size, b: torch.Size) -> bool:
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        return False
    return True


def unary(b: Builder) -> bool:
    """A unary op on a value (float, integer and bool flavours)."""
    x = b.pick()
    if x is None:
        return False
    dtype = b.tensor(x).dtype
    table = FLOAT_UNARY if dtype.is_floating_point else BOOL_UNARY if dtype == torch.bool else INT_UNARY
    name, template = b.rng.choice(table)
    if name == "signbit" and _holds_nan(b.tensor(x)):
        return False
    return b.try_add(name, template, (x,))


def _holds_nan(xt: torch.Tensor) -> bool:
    """Whether `xt` holds a NaN, whose sign bit no implementation defines (eager's own vector and scalar
    kernels disagree, docs/testing.md): `signbit` of it, or a `copysign` taking the sign from it, is
    not generated (fuzz 225b89ef39: `signbit(sqrt(int8))`)."""
    return xt.is_floating_point() and bool(xt.isnan().any())


ORDERED_ON_TIES = frozenset({"minimum", "maximum", "maximum_nan", "clamp_min_t", "clamp_max_t"})
"""Ops whose answer on a -0.0/+0.0 tie eager's own kernels give by position (its vector loop keeps the
second operand, its scalar tail the first: docs/testing.md)."""


def _signed_zero_tie(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether both operands hold zeros and one of them a -0.0 (a tie `ORDERED_ON_TIES` may break either way)."""
    if not (a.is_floating_point() or b.is_floating_point()):
        return False
    zeros = [t[t == 0] for t in (a, b)]
    return all(z.numel() for z in zeros) and any(bool(torch.signbit(z.float()).any()) for z in zeros)


def binary(b: Builder) -> bool:
    """A binary op with a tensor or scalar right side; integer division by zero only on purpose."""
    x = b.pick()
    if x is None:
        return False
    weights = [BINARY_WEIGHTS.get(name, 1.0) for name, _, _ in BINARY]
    name, template, divides = b.rng.choices(BINARY, weights)[0]
    other, literal = _operand(b, x)
    swap = b.rng.random() < 0.15
    if literal is not None:
        if divides and not b.tensor(x).is_floating_point():
            if b.rng.random() < 0.04:
                return b.try_add(name + "_by_zero", template.replace("{1}", "0"), (x,), may_raise=True)
            literal = b.scalar(b.tensor(x).dtype, nonzero=True)
        if name == "div_trunc":
            template = trapless_trunc_division(template, b.tensor(x), ast.literal_eval(literal))
        rhs = f"({literal})" if literal.startswith("-") else literal
        left, right = ("{0}", rhs) if not swap or divides else (rhs, "{0}")
        return b.try_add(name, template.format(left, right), (x,))
    args = (other, x) if swap else (x, other)
    if name in ORDERED_ON_TIES and _signed_zero_tie(b.tensor(x), b.tensor(other)):
        return False
    if name == "div_trunc":
        template = trapless_trunc_division(template, b.tensor(args[0]), b.tensor(args[1]))
    if divides and not b.tensor(args[1]).is_floating_point():
        if b.rng.random() < 0.04:
            return b.try_add(name + "_raw", template, args, may_raise=True)
        template = template.replace("{1}", SAFE_DIVISOR.format(d="{1}"))
    if name == "pow_tensor" and not b.tensor(args[1]).is_floating_point():
        template = "{0} ** ({1} & 3)"  # integers to negative integer powers raise in eager
    return b.try_add(name, template, args)


def shift(b: Builder) -> bool:
    """`<<` / `>>` on integers by a scalar (sometimes past the bit width) or by a tensor."""
    x = b.pick(lambda t: not t.is_floating_point() and t.dtype != torch.bool)
    if x is None:
        return False
    op = b.rng.choice(["<<", ">>"])
    bits = torch.iinfo(b.tensor(x).dtype).bits
    if b.rng.random() < 0.6:
        amount = b.rng.randrange(bits) if b.rng.random() < 0.85 else b.rng.choice([bits, bits + 3, 64])
        return b.try_add("lshift" if op == "<<" else "rshift", f"{{0}} {op} {amount}", (x,))
    other = b.new_input(b.broadcastable_to(tuple(b.tensor(x).shape)), b.rng.choice(["int64", "int32", "uint8"]), "small")
    masked = b.rng.random() < 0.7
    template = f"{{0}} {op} ({{1}} & {bits - 1})" if masked else f"{{0}} {op} {{1}}"
    return b.try_add(("lshift" if op == "<<" else "rshift") + ("_tensor" if masked else "_raw"), template, (x, other))


def where_clamp(b: Builder) -> bool:
    """where (condition from a comparison or a bool value), clamp with scalar or tensor bounds, lerp, addcmul."""
    x = b.pick()
    if x is None:
        return False
    xt = b.tensor(x)
    kind = b.rng.choice(["where_cmp", "where_bool", "where_scalar", "clamp", "clamp_tensor", "clamp_min", "lerp", "addcmul"])
    if kind == "where_cmp":
        other, literal = _operand(b, x)
        if literal is None:
            return b.try_add(kind, "torch.where({0} > 0, {0}, {1})", (x, other))
        return b.try_add(kind, f"torch.where({{0}} > 0, {{0}}, {literal})", (x,))
    if kind == "where_bool":
        cond = b.pick(lambda t: t.dtype == torch.bool and _broadcasts(t.shape, xt.shape))
        cond = cond or b.new_input(b.broadcastable_to(tuple(xt.shape)), "bool")
        other, literal = _operand(b, x)
        if literal is not None:
            return b.try_add(kind, f"torch.where({{1}}, {{0}}, {literal})", (x, cond))
        return b.try_add(kind, "torch.where({2}, {0}, {1})", (x, other, cond))
    if kind == "where_scalar":
        return b.try_add(kind, f"torch.where({{0}} != 0, {b.scalar(xt.dtype)}, {b.scalar(xt.dtype)})", (x,))
    if kind == "clamp":
        lo, hi = b.scalar(xt.dtype), b.scalar(xt.dtype)
        return b.try_add(kind, f"torch.clamp({{0}}, min={lo}, max={hi})", (x,))
    if kind == "clamp_min":
        return b.try_add(kind, f"{{0}}.clamp_min({b.scalar(xt.dtype)})", (x,))
    if kind == "clamp_tensor":
        lo = b.new_input(b.broadcastable_to(tuple(xt.shape)), dtype_name(xt.dtype))
        hi = b.new_input(b.broadcastable_to(tuple(xt.shape)), dtype_name(xt.dtype))
        return b.try_add(kind, "torch.clamp({0}, {1}, {2})", (x, lo, hi))
    if kind == "lerp":
        end = b.new_input(b.broadcastable_to(tuple(xt.shape)), dtype_name(xt.dtype))
        weight = b.rng.choice(["0.25", "0.75", "1.5"])
        return b.try_add(kind, f"torch.lerp({{0}}, {{1}}, {weight})", (x, end))
    t1 = b.new_input(b.broadcastable_to(tuple(xt.shape)), dtype_name(xt.dtype))
    t2 = b.new_input(b.broadcastable_to(tuple(xt.shape)), dtype_name(xt.dtype))
    return b.try_add(kind, "torch.addcmul({0}, {1}, {2}, value=0.5)", (x, t1, t2))


def cast(b: Builder) -> bool:
    """`.to(dtype)`; floats reach integers only through nan_to_num and a clamp to the target's range
    (out-of-range float-to-integer conversion is undefined behaviour in C++ and in eager alike)."""
    x = b.pick()
    if x is None:
        return False
    src = b.tensor(x).dtype
    target = b.random_dtype()
    if src.is_floating_point and target not in FLOATS and target != "bool":
        lo, hi = (0, 250) if target == "uint8" else (-120, 120)
        template = f"torch.nan_to_num({{0}}, 0.0, {hi}.0, {lo}.0).clamp({lo}, {hi}).to(torch.{target})"
        return b.try_add("cast_float_int", template, (x,))
    return b.try_add(f"cast_{target}", f"{{0}}.to(torch.{target})", (x,))


SPECIAL_UNARY: tuple[tuple[str, str], ...] = (
    ("isfinite", "torch.isfinite({0})"), ("isposinf", "torch.isposinf({0})"), ("isneginf", "torch.isneginf({0})"),
    ("signbit", "torch.signbit({0})"), ("sgn", "torch.sgn({0})"), ("nan_to_num_args", "torch.nan_to_num({0}, nan=1.5, posinf=2.0, neginf=-3.0)"),
    ("nan_to_num_nan", "torch.nan_to_num({0}, nan={s})"), ("clamp_nan", "torch.clamp({0}, min=float('nan'))"),
    ("clamp_max_nan", "{0}.clamp_max(float('nan'))"), ("clamp_max", "torch.clamp_max({0}, {s})"),
    ("clamp_inverted", "torch.clamp({0}, min=1, max=-1)"), ("clamp_min_tensor_nan", "{0}.clamp_min(torch.tensor(float('nan')))"),
    ("remainder_neg", "torch.remainder({0}, {neg})"), ("fmod_neg", "torch.fmod({0}, {neg})"), ("mod_neg", "{0} % {neg}"),
    ("floordiv_neg", "{0} // {neg}"), ("rremainder", "torch.remainder({neg}, torch.where({0} == 0, 1, {0}))"),
    ("ipow", "torch.pow({0}, {k})"), ("rpow_int", "torch.pow(2, {0} & 7)"), ("rpow_neg", "(-3) ** ({0} & 3)"),
    ("float_power", "torch.float_power({0}, 2)"), ("square", "torch.square({0})"),
    ("where_scalars", "torch.where({0} > 0, {s}, {s2})"), ("where_int_float", "torch.where({0} > 0, 2, 0.5)"),
    ("where_bool_scalar", "torch.where({0} != 0, True, {0})"), ("add_bool", "{0} + True"),
    ("bool_and", "({0} > 0) & ({0} < 2)"), ("bool_xor", "({0} > 0) ^ True"), ("bool_or_not", "~({0} == 0) | ({0} > 1)"),
    ("logical_or", "torch.logical_or({0}, {0} > 1)"), ("promote_0d_int", "{0} + torch.tensor(3)"),
    ("promote_0d_float", "{0} * torch.tensor(2.5, dtype=torch.float64)"), ("promote_0d_bool", "{0} - torch.tensor(True).long()"),
    ("promote_scalar_float", "{0} * 1.5"), ("promote_int_true_div", "{0} / 2"),
    ("erfinv", "torch.erfinv(torch.sigmoid({0}) - 0.5)"), ("lgamma", "torch.lgamma({0})"), ("digamma", "torch.digamma({0})"),
    ("logit", "torch.logit({0}, eps=1e-3)"), ("sinc", "torch.sinc({0})"), ("i0", "torch.special.i0({0})"),
    ("ndtr", "torch.special.ndtr({0})"), ("asinh", "torch.asinh({0})"), ("acos", "torch.acos({0})"),
    ("deg2rad", "torch.deg2rad({0})"), ("log10", "torch.log10({0})"), ("exp_neg_abs", "torch.exp(-{0}.abs())"),
    ("hardsigmoid", "F.hardsigmoid({0})"), ("mish", "F.mish({0})"), ("softsign", "F.softsign({0})"),
    ("celu", "F.celu({0}, 0.5)"), ("selu", "F.selu({0})"), ("threshold", "F.threshold({0}, 0.5, -2.0)"),
    ("logsigmoid", "F.logsigmoid({0})"), ("softshrink", "F.softshrink({0}, 0.5)"), ("hardshrink", "F.hardshrink({0})"),
    ("tanhshrink", "F.tanhshrink({0})"), ("dropout_eval", "F.dropout({0}, 0.5, training=False)"),
    ("dropout_p0", "F.dropout({0}, 0.0)"), ("alpha_dropout_eval", "F.alpha_dropout({0}, 0.2, training=False)"),
)
SPECIAL_BINARY: tuple[tuple[str, str], ...] = (
    ("hypot", "torch.hypot({0}, {1})"), ("atan2", "torch.atan2({0}, {1})"), ("copysign", "torch.copysign({0}, {1})"),
    ("fmin", "torch.fmin({0}, {1})"), ("logaddexp", "torch.logaddexp({0}, {1})"), ("logaddexp2", "torch.logaddexp2({0}, {1})"),
    ("xlogy", "torch.xlogy({0}, {1})"), ("xlog1py", "torch.special.xlog1py({0}, {1})"), ("heaviside", "torch.heaviside({0}, {1})"),
    ("nextafter", "torch.nextafter({0}, {1})"), ("ldexp", "torch.ldexp({0}, {1})"), ("float_power_t", "torch.float_power({0}, {1})"),
    ("remainder_t", "torch.remainder({0}, {1})"), ("fmod_t", "torch.fmod({0}, {1})"), ("clamp_min_t", "{0}.clamp_min({1})"),
    ("clamp_max_t", "torch.clamp_max({0}, {1})"), ("maximum_nan", "torch.maximum({0}, {1})"),
    ("logical_or_t", "torch.logical_or({0}, {1})"), ("bitwise_or_bool", "({0} > 0) | ({1} > 0)"),
    ("where_promote", "torch.where({0} > {1}, {0}, {1})"), ("lt_promote", "{0} < {1}"), ("eq_promote", "{0} == {1}"),
    ("isclose", "torch.isclose({0}, {1})"), ("pow_mixed", "torch.pow({0}, {1})"), ("polar_abs", "torch.hypot({0}, {1}).sqrt()"),
)


def special(b: Builder) -> bool:
    """Pointwise ops with edge semantics: NaN in clamp bounds, signed zeros and infinities,
    remainder/fmod/floor division by negative operands, integer powers, where with scalars of
    other dtypes, type promotion with 0-d tensors, special functions, dropout that is the identity."""
    x = b.pick()
    if x is None:
        return False
    xt = b.tensor(x)
    rng = b.rng
    if rng.random() < 0.6:
        name, template = rng.choice(SPECIAL_UNARY)
        if name == "signbit" and _holds_nan(xt):
            return False
        neg = rng.choice(["-1.5", "-2", "-3", "-0.5", "-7"]) if xt.is_floating_point() else rng.choice(["-2", "-3", "-7"])
        filled = (template.replace("{s}", b.scalar(xt.dtype)).replace("{s2}", b.scalar(torch.float32))
                  .replace("{neg}", f"({neg})").replace("{k}", rng.choice(["2", "3", "0", "5"])))
        return b.try_add(name, filled, (x,))
    name, template = rng.choice(SPECIAL_BINARY)
    other, literal = _operand(b, x)
    if name == "copysign" and literal is None and _holds_nan(b.tensor(other)):
        return False
    if name in ORDERED_ON_TIES and literal is None and _signed_zero_tie(xt, b.tensor(other)):
        return False
    if literal is not None:
        return b.try_add(name, template.replace("{1}", f"({literal})"), (x,))
    if name in ("remainder_t", "fmod_t") and not b.tensor(other).is_floating_point():
        template = template.replace("{1}", SAFE_DIVISOR.format(d="{1}"))
    if name == "pow_mixed" and not b.tensor(other).is_floating_point():
        template = "torch.pow({0}, {1} & 3)"
    return b.try_add(name, template, (x, other))
