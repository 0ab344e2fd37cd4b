"""Narrow integers (uint8, int8, int16) are held in int32 in C++ kernels and wrap after every op.

A value used inside the kernel that computes it (not only stored, where the store narrows it) must
be its dtype's value: `(u8 * 2) // 3` divides the wrapped product, as eager does. The whole op sweep
runs through `frontend.compile` in packages/frontend/tests/test_narrow_ints.py; these are the
reported programs, in one library.
"""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend


def _programs(u: torch.Tensor, a: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        (u * 2) // 3,
        (u * 2) > 100,
        (a * 3).sum(),
        (~u).to(torch.int64),
        (-a).to(torch.int64) + a.abs(),
        torch.bitwise_left_shift(u, 3).to(torch.int32),
        (h * h).to(torch.int64),
        (a - 100).amin(-1),
        u.reshape(4, 16).sum(0, dtype=torch.uint8) // 3,
    )


def test_narrow_int_values_wrap_inside_kernels(backend: CppBackend) -> None:
    generator = torch.Generator().manual_seed(0)
    u = torch.cat([torch.tensor([200, 255, 3, 128]), torch.randint(0, 256, (60,), generator=generator)]).to(torch.uint8)
    a = torch.cat([torch.tensor([100, 50, -90, -128]), torch.randint(-128, 128, (60,), generator=generator)])
    a = a.to(torch.int8).reshape(4, 16)
    h = torch.randint(-(2**15), 2**15, (64,), generator=generator).to(torch.int16)
    compiled = inductor_ir.compile_graph(make_fx(_programs)(u, a, h), [u, a, h], backends={"cpu": backend})
    for k, (got, want) in enumerate(zip(compiled(u, a, h), _programs(u, a, h))):
        assert got.dtype == want.dtype and torch.equal(got, want), f"program {k}: {got} != {want}"


def _divisions(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return a // b, a % b, torch.fmod(a, b), a // -1, a % -1


def test_the_minimum_divided_by_minus_one_wraps_instead_of_trapping(backend: CppBackend) -> None:
    """x86 traps (SIGFPE, the whole process) on ``min / -1``; eager gives ``min`` and 0."""
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.int64, torch.int32, torch.int16, torch.int8):
        low = torch.iinfo(dtype).min
        a = torch.cat([torch.tensor([low, low, low + 1, 7]), torch.randint(-100, 100, (60,), generator=generator)])
        b = torch.cat([torch.tensor([-1, 1, -1, -1]), torch.randint(1, 9, (60,), generator=generator)])
        sign = torch.where((torch.arange(64) >= 4) & (torch.rand(64, generator=generator) < 0.5), -1, 1)
        a, b = a.to(dtype), (b * sign).to(dtype)
        compiled = inductor_ir.compile_graph(make_fx(_divisions)(a, b), [a, b], backends={"cpu": backend})
        for k, (got, want) in enumerate(zip(compiled(a, b), _divisions(a, b))):
            assert got.dtype == want.dtype and torch.equal(got, want), f"{dtype} program {k}: {got} != {want}"
