"""Result dtypes and Python scalar operands of narrow integer ops follow eager.

``uint8.all()`` / ``uint8.any(dim)`` are uint8 (0 or 1) in eager, bool for every other dtype. A
Python scalar outside a narrow integer dtype's range is cast to that dtype (two's complement) before
the op: ``int8 & 300`` is ``int8 & 44``, ``u8.add(v, alpha=-2)`` scales by 254.
"""

from __future__ import annotations

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, check_interpret
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


def _any_all(u: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return u.all(), u.any(0), u.all(-1, keepdim=True), u.any(), b.all(1), b.any()


def _operands() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(3)
    u = torch.randint(0, 4, (5, 6), generator=generator, dtype=torch.int64).to(torch.uint8)
    u[0] = 7  # one row with no zero: all() is 1 there
    b = torch.randint(0, 2, (4, 3), generator=generator).bool()
    return [u, b]


def test_uint8_any_all_are_uint8_like_eager() -> None:
    check_interpret(_any_all, _operands)


def test_uint8_any_all_through_a_backend() -> None:
    inputs = _operands()
    compiled = inductor_ir.compile_graph(make_fx(_any_all)(*inputs), inputs, backends={"cpu": ReferenceBackend()})
    assert_close(compiled(*inputs), _any_all(*inputs))


def _wide_scalars(a: torch.Tensor, u: torch.Tensor, v: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        (a & 300) + w,  # the wrapped value seen through a wider op (int32)
        a & 300,
        u | 300,
        u.add(v, alpha=-2),
        a.sub(a, alpha=3),
        u < 300,
        torch.remainder(a, 300),
        a // 300,
        (u ^ -1).to(torch.int64),
    )


def _narrow_operands() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(5)
    a = torch.randint(-128, 128, (3, 8), generator=generator, dtype=torch.int64).to(torch.int8)
    u = torch.randint(0, 256, (3, 8), generator=generator, dtype=torch.int64).to(torch.uint8)
    v = torch.randint(0, 256, (8,), generator=generator, dtype=torch.int64).to(torch.uint8)
    w = torch.randint(-1000, 1000, (8,), generator=generator, dtype=torch.int32)
    return [a, u, v, w]


def test_scalars_outside_a_narrow_range_wrap_like_eager() -> None:
    check_interpret(_wide_scalars, _narrow_operands)
