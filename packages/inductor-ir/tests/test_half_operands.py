"""float16/bfloat16 ops round as eager's CPU kernels do.

Eager casts each operand of a half op to the half dtype before computing in float32: a Python
scalar is rounded (``f16 % 0.7`` divides by 0.7002), an int64 tensor beyond float16's range is inf;
mul and div read a scalar operand at float32 precision instead. Division by a tensor with
``rounding_mode`` rounds every step to the half dtype (trunc of the rounded quotient; the fmod-based
floor division in half arithmetic), so a float32 quotient can land on the other integer.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir

HALVES = (torch.float16, torch.bfloat16)


def _operands(dtype: torch.dtype) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(11)
    a = (torch.randn(4000, generator=generator) * 40).to(dtype)
    b = (torch.randn(4000, generator=generator) + 0.1).to(dtype)
    b[:3] = 0  # division by zero gives the IEEE quotient
    ints = torch.randint(-100000, 100000, (4000,), generator=generator)
    return [a, b, ints, torch.tensor(0.7).to(dtype)]


PROGRAMS: dict[str, Callable[..., torch.Tensor]] = {
    "remainder_scalar": lambda a, b, i, z: a % 0.7,
    "fmod_scalar": lambda a, b, i, z: torch.fmod(a, 0.7),
    "add_scalar": lambda a, b, i, z: a + 0.7,
    "rsub_int": lambda a, b, i, z: 100003 - a,
    "pow_scalar": lambda a, b, i, z: a.abs() ** 0.7,
    "mul_scalar": lambda a, b, i, z: a * 0.7,
    "div_scalar": lambda a, b, i, z: a / 0.7,
    "floor_div_scalar": lambda a, b, i, z: a // 0.7,
    "trunc_div_scalar": lambda a, b, i, z: torch.div(a, 0.7, rounding_mode="trunc"),
    "floor_div_0d": lambda a, b, i, z: a // z,
    "floor_div": lambda a, b, i, z: a // b,
    "trunc_div": lambda a, b, i, z: torch.div(a, b, rounding_mode="trunc"),
    "fused_trunc_div": lambda a, b, i, z: torch.div(
        a.abs(), torch.sin(torch.sqrt(a.abs())) * torch.sqrt(a.abs()), rounding_mode="trunc"
    ),
    "int_remainder": lambda a, b, i, z: i % b,
    "int_mul": lambda a, b, i, z: i * a,
}


def _same(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype
    nan = expected.isnan()
    assert torch.equal(actual.isnan(), nan)
    assert torch.equal(actual[~nan], expected[~nan])
    assert torch.equal(actual[~nan].signbit(), expected[~nan].signbit())


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_half_op_matches_eager_bit_for_bit(name: str, dtype: torch.dtype) -> None:
    fn = PROGRAMS[name]
    inputs = _operands(dtype)
    program = inductor_ir.lower(make_fx(fn)(*inputs), inputs)
    assert not program.lowering_errors, program.lowering_errors
    fresh = _operands(dtype)
    (actual,) = inductor_ir.interpret(program, fresh)
    _same(actual, fn(*fresh))


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("parameters", ["float32", "none", "half"])
def test_norm_statistics_have_eager_dtype_and_values(dtype: torch.dtype, parameters: str) -> None:
    """A half input with float32 weight and bias takes ATen's mixed-type path: mean and rstd come back in
    float32 (fuzz 2532db79f3: rounded to bfloat16, a group norm's rstd 6.985 became 7.0 and the gradient
    through it was off); without float32 parameters they are in the input's dtype on the CPU."""
    aten = torch.ops.aten
    table = inductor_ir.decompositions()
    generator = torch.Generator().manual_seed(12)
    x = (torch.randn(2, 4, 6, generator=generator) * 3 + 0.9).to(dtype)

    def params(size: int) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if parameters == "none":
            return None, None
        weight, bias = torch.randn(size, generator=generator), torch.randn(size, generator=generator)
        return (weight, bias) if parameters == "float32" else (weight.to(dtype), bias.to(dtype))

    weight, bias = params(4)
    cases = [
        (aten.native_group_norm.default, (x, weight, bias, 2, 4, 6, 2, 1e-5)),
        (aten.native_layer_norm.default, (x, [6], *params(6), 1e-5)),
    ]
    for op, args in cases:
        expected, got = op(*args), table[op](*args)
        assert [t.dtype for t in got] == [t.dtype for t in expected], op
        for mine, eager in zip(got[1:], expected[1:]):
            torch.testing.assert_close(mine, eager, rtol=2e-6, atol=1e-6)
        torch.testing.assert_close(got[0], expected[0])
