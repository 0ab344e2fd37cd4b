"""uint8, int8 and int16 arithmetic wraps inside fused kernels, as in eager.

The C++ backend holds narrow integers in int32; a value computed in a kernel and used there (not
only stored) must still wrap to its dtype: `(u8 * 2) // 3` divides the wrapped product. Every op is
checked on seeded random inputs over the whole range of each dtype, its result seen through a wider
view in the same kernel (a cast to int64, a comparison, a sum). int32 rides along as a sanity check
of overflow.
"""

from __future__ import annotations

import pytest
import torch

import frontend

pytestmark = pytest.mark.usefixtures("fresh_cache")

DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32)
SHAPE = (5, 37)  # a vector loop and a scalar tail per row


def narrow_int_ops(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, s: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each op on ``a``, ``b`` (a nonzero divisor ``d``, shift amounts ``s`` below the bit width),
    seen through a wider view in the kernel that computes it (the stored value wraps anyway)."""
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
    })  # fmt: skip
    return results


def random_operands(dtype: torch.dtype, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    """``a, b, d, s`` over ``dtype``'s whole range (``d`` nonzero, ``s`` in [0, bits))."""
    info = torch.iinfo(dtype)

    def draw(low: int, high: int) -> torch.Tensor:
        return torch.randint(low, high, SHAPE, generator=generator, dtype=torch.int64).to(dtype)

    a, b, d = draw(info.min, info.max + 1), draw(info.min, info.max + 1), draw(info.min, info.max + 1)
    d = torch.where(d == 0, torch.ones_like(d), d)
    if dtype.is_signed:
        d = torch.where(d == -1, torch.full_like(d, 3), d)  # info.min // -1 overflows in eager's division too
    return a, b, d, draw(0, info.bits)


def test_narrow_int_arithmetic_wraps_like_eager() -> None:
    generator = torch.Generator().manual_seed(0)
    flat = [t for dtype in DTYPES for t in random_operands(dtype, generator)]

    def program(*args: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        return [narrow_int_ops(*args[k : k + 4]) for k in range(0, len(args), 4)]

    with frontend.config.patch(fallback_to_eager=False):
        actual = frontend.compile(program, fullgraph=True)(*flat)
    wrong = []
    for dtype, got, want in zip(DTYPES, actual, program(*flat)):
        for name, value in want.items():
            if got[name].dtype != value.dtype or not torch.equal(got[name], value):
                wrong.append(f"{dtype} {name}: {got[name].tolist()} != {value.tolist()}")
    assert not wrong, "\n".join(wrong)
