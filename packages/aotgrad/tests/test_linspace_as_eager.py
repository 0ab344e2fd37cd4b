"""``linspace`` stays whole in aotgrad's default table (`KEPT_AS_EAGER`), so the graphs `aot_eager` runs
give eager's bits.

Eager's kernel computes each element as one fused multiply-add; torch's decomposition rounds the
product and the sum apart, which gave eager's bits for 80% of float32 elements (fuzz 06b9d85243:
``linspace(-2, 2, 7)[3]`` is ``2 - 3 * 0.6666667`` rounded once, -5.96e-08, in eager, and was 0.0, so
``count_nonzero(mask + linspace(-2, 2, 7))`` of a row with ``mask[3]`` false was 6 where eager says 7).
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from aotgrad_helpers import RecordingCompiler, strict

import aotgrad

aten = torch.ops.aten

_CASES = [
    (-2, 2, 7), (0, 1, 1), (0, 1, 2), (-1, 1, 3), (-3, 5, 15), (0.1, 0.7, 17), (-3.3, 1e3, 33),
    (-7, 13, 1000), (-0.0, -0.0, 4), (1.0, 1.0000001192092896, 155), (1.0, 1.0000000000000002, 135),
]  # fmt: skip


def _cases() -> list[tuple[float, float, int]]:
    rng = random.Random(3)
    steps = [2, 7, 8, 16, 17, 33, 257, 1001]
    return _CASES + [(rng.uniform(-100, 100), rng.uniform(-1, 1), rng.choice(steps)) for _ in range(30)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_aot_eager_linspace_has_eagers_bits(dtype: torch.dtype) -> None:
    cases = _cases()

    def fn(x: torch.Tensor) -> list[torch.Tensor]:
        return [torch.linspace(a, b, n, dtype=dtype) * x for a, b, n in cases]

    recorder = RecordingCompiler()
    compiled = aotgrad.aot_function(fn, fw_compiler=recorder, config=strict())
    one = torch.ones((), dtype=dtype)  # x * 1 keeps every value, the sign of a zero included
    for case, got, want in zip(cases, compiled(one), fn(one), strict=True):
        assert torch.equal(got.view(-1).signbit(), want.view(-1).signbit()) and torch.equal(got, want), case
    targets = {node.target for gm in recorder.graphs for node in gm.graph.nodes}
    assert aten.linspace.default in targets


def test_count_nonzero_of_a_shifted_linspace() -> None:
    # fuzz 06b9d85243, under bfloat16 autocast as the fuzzer ran it.
    def fn(mask: torch.Tensor) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.count_nonzero(mask + torch.linspace(-2, 2, mask.size(-1), dtype=torch.float32), 1)

    mask = torch.rand(3, 7, generator=torch.Generator().manual_seed(5)) > 0.5
    mask[1:, 3] = False  # where 0.0 in place of eager's -5.96e-08 was not counted
    compiled = aotgrad.aot_function(fn, fw_compiler=aotgrad.eager_compiler, config=strict())
    assert torch.equal(compiled(mask), fn(mask))


def test_linspace_is_kept_whole_by_the_default_table() -> None:
    table = aotgrad.default_decompositions()
    for name in aten.linspace.overloads():
        assert getattr(aten.linspace, name) not in table
