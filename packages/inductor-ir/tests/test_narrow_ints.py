"""The reference interpreter computes uint8, int8 and int16 ops in their own dtype, wrapping as eager.

Backends hold narrow integers in wider registers (the C++ one in int32) and must wrap every result;
the IR gives each op the narrow dtype, and the interpreter, which evaluates the IR with torch ops on
tensors of that dtype, is the reference they are compared with. int32 rides along.
"""

from __future__ import annotations

import pytest
import torch
from inductor_ir_testing import check_interpret

DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32)
SHAPE = (5, 37)


def narrow_int_ops(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, s: torch.Tensor) -> list[torch.Tensor]:
    """Each op on ``a``, ``b`` (a nonzero divisor ``d``, shift amounts ``s`` below the bit width),
    seen through a wider view in the same kernel (a cast to int64, a comparison, a sum)."""
    values = [
        a + b, a - b, a * b, a * 3, 7 - a, a // d, a % d, (a * 2) // 3, -a, a.abs(), a & b, a | b, a ^ b, ~a,
        torch.bitwise_left_shift(a, s), torch.bitwise_right_shift(a, s), (a + b) * (a - b), (~a) + b,
    ]  # fmt: skip
    results = [value.to(torch.int64) for value in values] + [values[2], values[7], values[13]]
    results += [a * b > a + b, (a - b) <= d, -a < 0, values[14] >= a, a * 2 == b * 2, (a + b) != a * 2]
    results += [(a * b).sum(-1), (a * 3).sum(), (a + b).amax(-1), (a - b).amin(0), (~a).to(torch.int64).sum(0)]
    results += [(a * b).sum(0, dtype=a.dtype) // 3]
    return results


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_interpreter_wraps_narrow_ints_like_eager(dtype: torch.dtype) -> None:
    generator = torch.Generator().manual_seed(0)
    info = torch.iinfo(dtype)

    def operands() -> list[torch.Tensor]:
        def draw(low: int, high: int) -> torch.Tensor:
            return torch.randint(low, high, SHAPE, generator=generator, dtype=torch.int64).to(dtype)

        a, b, d = draw(info.min, info.max + 1), draw(info.min, info.max + 1), draw(info.min, info.max + 1)
        d = torch.where((d == 0) | (d == -1), torch.full_like(d, 3), d)  # info.min // -1 overflows
        return [a, b, d, draw(0, info.bits)]

    program = check_interpret(narrow_int_ops, operands)
    ops = {b.dtype for b in program.buffers if b.name.startswith("buf")}
    assert dtype in ops  # the IR computes in the narrow dtype itself
