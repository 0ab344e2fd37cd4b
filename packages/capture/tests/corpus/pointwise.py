"""Plain tensor programs: pointwise arithmetic, activations, comparisons, type conversions, broadcasting."""

from __future__ import annotations

import torch
import torch.nn.functional as nnf

from ._registry import args, ints, positive, program, randn, x, xy

F = "pointwise"


@program(F, xy((4, 4)))
def add_mul_sub(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a + b) * (a - b)


@program(F, args(lambda: randn(4, 4), lambda: positive(4, 4)))
def div_and_pow(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a / b + b**0.5 - a**2


@program(F, args(lambda: positive(4, 4)))
def log_exp_sqrt(a: torch.Tensor) -> torch.Tensor:
    return a.log() + a.exp() - a.sqrt() + a.rsqrt()


@program(F, x(4, 4))
def trig_functions(a: torch.Tensor) -> torch.Tensor:
    return a.sin() * a.cos() + torch.atan2(a, a + 2)


@program(F, x(4, 4))
def activations(a: torch.Tensor) -> torch.Tensor:
    return nnf.relu(a) + nnf.gelu(a) + nnf.silu(a) + nnf.elu(a) + nnf.leaky_relu(a, 0.1)


@program(F, x(4, 4))
def sigmoid_tanh_softplus(a: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(a) * torch.tanh(a) + nnf.softplus(a) + nnf.hardswish(a)


@program(F, xy((4, 1), (1, 5)))
def broadcasting(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a * b + a - b


@program(F, xy((4, 4)))
def comparisons_and_where(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.where(a > b, a, b) + (a == a).float() - (a < 0).to(a.dtype)


@program(F, xy((4, 4)))
def logical_ops(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m = (a > 0) & (b > 0) | ~(a > b)
    return m.float() * a


@program(F, x(4, 4))
def clamp_abs_sign(a: torch.Tensor) -> torch.Tensor:
    return a.clamp(-0.5, 0.5) + a.abs() * a.sign()


@program(F, x(4, 4))
def dtype_conversions(a: torch.Tensor) -> torch.Tensor:
    return a.to(torch.float64).double().float() + a.half().float() + (a * 10).int().float()


@program(F, args(lambda: ints(10, 4, 4), lambda: ints(10, 4, 4)))
def integer_arithmetic(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a // b + a % b + a * b - torch.bitwise_and(a, b)


@program(F, x(4, 4))
def scalar_tensor_mix(a: torch.Tensor) -> torch.Tensor:
    return 2 * a + 3 - a / 4 + 1 / (a.abs() + 1)


@program(F, x(4, 4))
def floor_ceil_round_frac(a: torch.Tensor) -> torch.Tensor:
    b = a * 5
    return b.floor() + b.ceil() + b.round() + b.frac() + b.trunc()


@program(F, xy((4, 4)))
def min_max_elementwise(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.maximum(a, b) - torch.minimum(a, b) + torch.fmax(a, b)


@program(F, x(4, 4))
def erf_lgamma_special(a: torch.Tensor) -> torch.Tensor:
    return torch.erf(a) + torch.special.expit(a) + torch.lgamma(a.abs() + 1)


@program(F, xy((4, 4)))
def lerp_addcmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.lerp(a, b, 0.3) + torch.addcmul(a, a, b, value=0.5) + torch.addcdiv(a, a, b.abs() + 1)


@program(F, x(4, 4))
def nan_to_num_and_isfinite(a: torch.Tensor) -> torch.Tensor:
    b = a / (a > 0).float()
    return torch.nan_to_num(b, nan=0.0, posinf=1.0, neginf=-1.0) + torch.isfinite(b).float()


@program(F, x(4, 4))
def factory_ops_in_region(a: torch.Tensor) -> torch.Tensor:
    return a + torch.ones(4, 4) * 2 + torch.arange(4).float() + torch.full((4, 4), 0.5) + torch.eye(4)


@program(F, x(4, 4))
def like_factories(a: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(a) + torch.zeros_like(a) + torch.full_like(a, 3.0) + a.new_ones(4)
