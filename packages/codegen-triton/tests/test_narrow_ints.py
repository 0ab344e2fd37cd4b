"""uint8, int8 and int16 arithmetic wraps inside fused Triton kernels, as in eager.

Every op is checked on seeded random inputs over the whole range of each dtype, seen through a
wider view in the kernel that computes it (a cast to int64, a comparison, a sum); int32 rides along
as a sanity check of overflow. Runs in Triton's interpreter on CPU tensors.
"""

from __future__ import annotations

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32)
SHAPE = (5, 37)


def narrow_int_ops(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, s: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each op on ``a``, ``b`` (a nonzero divisor ``d``, shift amounts ``s`` below the bit width)."""
    values = {
        "a+b": a + b, "a-b": a - b, "a*b": a * b, "a*3": a * 3, "7-a": 7 - a, "a//d": a // d, "a%d": a % d,
        "(a*2)//3": (a * 2) // 3, "-a": -a, "abs(a)": a.abs(), "a&b": a & b, "a|b": a | b, "a^b": a ^ b,
        "~a": ~a, "a<<s": torch.bitwise_left_shift(a, s), "a>>s": torch.bitwise_right_shift(a, s),
        "(a+b)*(a-b)": (a + b) * (a - b), "~a+b": (~a) + b,
    }  # fmt: skip
    results = {f"int64({name})": value.to(torch.int64) for name, value in values.items()}
    results.update({name: values[name] for name in ("a*b", "(a*2)//3", "~a")})
    results.update({
        "a*b > a+b": a * b > a + b, "a-b <= d": (a - b) <= d, "-a < 0": -a < 0,
        "a<<s >= a": torch.bitwise_left_shift(a, s) >= a, "a*2 == b*2": a * 2 == b * 2, "a+b != a*2": (a + b) != a * 2,
        "sum(a*b, -1)": (a * b).sum(-1), "sum(a*3)": (a * 3).sum(), "amax(a+b, -1)": (a + b).amax(-1),
        "amin(a-b, 0)": (a - b).amin(0), "sum(int64(~a), 0)": (~a).to(torch.int64).sum(0),
        "sum(a*b, 0, dtype)//3": (a * b).sum(0, dtype=a.dtype) // 3,
        "float64(scatter_add(a, s, b))": a.scatter_add(1, s.to(torch.int64), b).to(torch.float64),
        "float64(sum(a, -1, dtype)) / 64": a.sum(-1, dtype=a.dtype).to(torch.float64) / 64,
    })  # fmt: skip
    return results


def random_operands(dtype: torch.dtype, generator: torch.Generator) -> list[torch.Tensor]:
    """``a, b, d, s`` over ``dtype``'s whole range (``d`` nonzero and not -1, ``s`` in [0, bits))."""
    info = torch.iinfo(dtype)

    def draw(low: int, high: int) -> torch.Tensor:
        return torch.randint(low, high, SHAPE, generator=generator, dtype=torch.int64).to(dtype)

    a, b, d = draw(info.min, info.max + 1), draw(info.min, info.max + 1), draw(info.min, info.max + 1)
    d = torch.where((d == 0) | (d == -1), torch.full_like(d, 3), d)  # info.min // -1 overflows
    return [a, b, d, draw(0, info.bits)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_narrow_int_arithmetic_wraps_like_eager(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    inputs = random_operands(dtype, generator)
    compiled = inductor_ir.compile_graph(make_fx(narrow_int_ops)(*inputs), inputs, backends={"cpu": cpu_backend})
    actual = compiled(*inputs)
    wrong = []
    for name, want in narrow_int_ops(*inputs).items():
        got = actual[name]
        if got.dtype != want.dtype or not torch.equal(got, want):
            wrong.append(f"{name}: {got.tolist()} != {want.tolist()}")
    assert not wrong, "\n".join(wrong)
