"""Triton kernels of ``linspace`` give eager's bits (fuzz 06b9d85243), in the interpreter on CPU tensors
and, marked `gpu`, on CUDA tensors against eager's CUDA kernel.

Eager's kernels (CPU and CUDA) compute each element as one fused multiply-add; inductor_ir's lowering
builds that once-rounded result from float64 operations that are exact or rounded once, so it holds
whether or not Triton contracts a product and a sum (it does on a GPU). On CUDA an integer linspace
works in float32, where the CPU's works in float64.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend

_FIXED = [
    (-2, 2, 7), (0, 1, 1), (0, 1, 2), (-1, 1, 3), (0, 1, 8), (-3, 5, 15), (-1, 1, 16), (0.1, 0.7, 17),
    (-3.3, 1e3, 33), (-7, 13, 1000), (5, 5, 9), (-0.0, -0.0, 4), (-0.0, 1.0, 3), (-1e30, 1e30, 11),
    (1.0, 1.0000001192092896, 155), (1.0, 1.0000000000000002, 135), (1e-40, -3e-39, 17),
    (float("-inf"), float("inf"), 5), (float("nan"), 1.0, 4),
]  # fmt: skip

_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8, torch.uint8]


def _cases(dtype: torch.dtype) -> list[tuple[float, float, int]]:
    rng = random.Random(2)
    cases = list(_FIXED)
    for _ in range(30):
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


def _check(backend: TritonBackend, device: str, dtype: torch.dtype) -> None:
    cases = _cases(dtype)

    def fn() -> list[torch.Tensor]:
        return [torch.linspace(a, b, n, dtype=dtype, device=device) for a, b, n in cases]

    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())()
    compiled = inductor_ir.compile_graph(gm, [], backends={device: backend})
    assert not [b for b in compiled.program.buffers if type(b) is inductor_ir.FallbackKernel]
    for case, got, want in zip(cases, compiled(), fn(), strict=True):
        assert _same_bits(got, want), f"linspace{case}: {got} != {want}"


@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_linspace_kernels_have_eagers_bits(cpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    _check(cpu_backend, "cpu", dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", _DTYPES, ids=str)
def test_linspace_kernels_have_eagers_cuda_bits(gpu_backend: TritonBackend, dtype: torch.dtype) -> None:
    _check(gpu_backend, "cuda", dtype)
