"""math functions, builtins and arithmetic on Python constants mixed into tensor code."""

from __future__ import annotations

import math

import torch

from ._registry import program, x

F = "mathconst"


@program(F, x(4))
def math_sqrt_constant(a: torch.Tensor) -> torch.Tensor:
    return a / math.sqrt(64)


@program(F, x(4))
def math_pi_and_trig(a: torch.Tensor) -> torch.Tensor:
    return a * math.cos(math.pi / 3) + math.sin(0.5)


@program(F, x(4))
def math_log_exp(a: torch.Tensor) -> torch.Tensor:
    return a * math.log(10.0) + math.exp(-1.0)


@program(F, x(4))
def math_floor_ceil(a: torch.Tensor) -> torch.Tensor:
    return a * math.floor(3.7) - math.ceil(1.2)


@program(F, x(4))
def gelu_tanh_constant(a: torch.Tensor) -> torch.Tensor:
    return 0.5 * a * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a**3)))


@program(F, x(4))
def builtin_abs_round_pow(a: torch.Tensor) -> torch.Tensor:
    return a * abs(-2.5) + round(2.567, 2) + pow(2, 3)


@program(F, x(4))
def int_float_conversions(a: torch.Tensor) -> torch.Tensor:
    return a * int(7.9) + float("1.5")


@program(F, x(4))
def divmod_and_floordiv(a: torch.Tensor) -> torch.Tensor:
    q, r = divmod(17, 5)
    return a * q + r + 17 // 4


@program(F, x(4))
def math_isclose_and_inf(a: torch.Tensor) -> torch.Tensor:
    if math.isclose(0.1 + 0.2, 0.3) and not math.isinf(1e10):
        return a + 1
    return a


@program(F, x(4))
def math_gcd_factorial(a: torch.Tensor) -> torch.Tensor:
    return a * math.gcd(12, 18) + math.factorial(4)


@program(F, x(4))
def bool_and_ternary_arith(a: torch.Tensor) -> torch.Tensor:
    flag = 3 > 2
    return a * (2 if flag else 5) + int(flag)


@program(F, x(4))
def bitwise_int_constants(a: torch.Tensor) -> torch.Tensor:
    return a * ((6 & 3) | (1 << 2)) + (5 ^ 1)


@program(F, x(4))
def complex_expression_of_constants(a: torch.Tensor) -> torch.Tensor:
    eps = 1e-6
    scale = (1 + eps) ** 0.5 / max(1.0, math.hypot(3, 4))
    return a * scale


@program(F, x(4))
def torch_scalar_math(a: torch.Tensor) -> torch.Tensor:
    return a * torch.pi + torch.e
