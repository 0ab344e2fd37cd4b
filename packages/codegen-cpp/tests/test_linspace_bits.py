"""C++ kernels of ``linspace`` give eager's bits (fuzz 06b9d85243).

Eager's kernel computes each element as one fused multiply-add (ATen is compiled with contraction);
our kernels are compiled with ``-ffp-contract=off``, so inductor_ir's lowering builds the once-rounded
result from exact float64 operations. Before it, 19% of float32 elements on such a grid were off by
one bit: eager's ``linspace(-2, 2, 7)[3]`` is -5.96e-08 (``2 - 3 * 0.6666667`` rounded once), ours was
0.0, and ``count_nonzero`` of ``mask + linspace(-2, 2, 7)`` said 6 where eager says 7.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_cpp import CppBackend

_FIXED = [
    (-2, 2, 7), (0, 1, 1), (0, 1, 2), (-1, 1, 3), (0, 1, 8), (-3, 5, 15), (-1, 1, 16), (0.1, 0.7, 17),
    (-3.3, 1e3, 33), (-7, 13, 1000), (5, 5, 9), (-0.0, -0.0, 4), (-0.0, 1.0, 3), (-1e30, 1e30, 11),
    (1.0, 1.0000001192092896, 155), (1.0, 1.0000000000000002, 135), (1e-40, -3e-39, 17),
    (float("-inf"), float("inf"), 5), (float("nan"), 1.0, 4),
]  # fmt: skip


def _cases(dtype: torch.dtype) -> list[tuple[float, float, int]]:
    rng = random.Random(1)
    cases = list(_FIXED)
    for _ in range(40):
        steps = rng.choice([2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 65, 257, 1000, 1001, 3001])
        scale = rng.choice([20, 100, 1e6])
        cases.append((rng.uniform(-scale, scale), rng.uniform(-100, 100) / scale, steps))
        cases.append((rng.randint(-20, 20), rng.randint(-20, 20), steps))
    if dtype.is_floating_point:
        limit = torch.finfo(dtype).max
        return [c for c in cases if not max(abs(c[0]), abs(c[1])) < float("inf") or max(abs(c[0]), abs(c[1])) <= limit]
    info = torch.iinfo(dtype)
    ints = [(int(a), int(b), n) for a, b, n in cases if max(abs(a), abs(b)) < 128]
    return [c for c in ints if info.min <= min(c[:2]) and max(c[:2]) <= info.max]


def _same_bits(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """Bit for bit (any NaN equals any NaN; -0.0 differs from 0.0)."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return False
    if not expected.is_floating_point():
        return torch.equal(actual, expected)
    nan = expected.isnan()
    bits = {2: torch.int16, 4: torch.int32, 8: torch.int64}[expected.element_size()]
    return torch.equal(actual.isnan(), nan) and torch.equal(
        actual.masked_fill(nan, 0).view(bits), expected.masked_fill(nan, 0).view(bits)
    )


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.uint8], ids=str
)
def test_linspace_kernels_have_eagers_bits(backend: CppBackend, dtype: torch.dtype) -> None:
    cases = _cases(dtype)

    def fn() -> list[torch.Tensor]:
        return [torch.linspace(a, b, n, dtype=dtype) for a, b, n in cases]

    compiled = inductor_ir.compile_graph(make_fx(fn, decomposition_table=inductor_ir.decompositions())(), [], backends={"cpu": backend})
    assert not [b for b in compiled.program.buffers if type(b) is inductor_ir.FallbackKernel]
    for case, got, want in zip(cases, compiled(), fn(), strict=True):
        assert _same_bits(got, want), f"linspace{case}: {got} != {want}"


def test_count_nonzero_of_a_shifted_linspace(backend: CppBackend) -> None:
    # fuzz 06b9d85243: eager's linspace(-2, 2, 7)[3] is -5.96e-08, not 0.0.
    def fn(mask: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.count_nonzero(mask + torch.linspace(-2, 2, mask.size(-1), dtype=torch.float32), 1)

    mask = torch.rand(4, 7, generator=torch.Generator().manual_seed(3)) > 0.5
    mask[1:, 3] = False
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(mask)
    compiled = inductor_ir.compile_graph(gm, [mask], backends={"cpu": backend})
    assert torch.equal(compiled(mask), fn(mask)), (compiled(mask), fn(mask))
