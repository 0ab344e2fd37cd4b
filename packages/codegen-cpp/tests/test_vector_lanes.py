"""The vector width follows the CPU, and the runtime headers are compiled with the same width."""

from __future__ import annotations

from pathlib import Path

import torch

from codegen_cpp.codegen.lanes import VECTOR_FLAGS, VECTOR_LANES, vector_lanes_for
from codegen_cpp.compile.toolchain import find_toolchain
from codegen_cpp.config import CppConfig


def test_lanes_follow_the_registers() -> None:
    assert vector_lanes_for("fpu sse2 avx avx2 fma") == 8
    assert vector_lanes_for("fpu sse2 avx avx2 avx512f avx512dq") == 16
    assert vector_lanes_for("") == 8
    assert VECTOR_LANES in (8, 16)


def test_every_compile_passes_the_lane_count(tmp_path: Path) -> None:
    toolchain = find_toolchain(CppConfig(cache_dir=tmp_path))
    assert f"-DKILN_VEC={VECTOR_LANES}" in toolchain.flags
    assert VECTOR_FLAGS == (f"-DKILN_VEC={VECTOR_LANES}",)


def test_row_sums_of_every_tail_length_match_eager() -> None:
    import frontend

    compiled = frontend.compile(lambda x: (x.sum(-1), x.amax(-1), torch.softmax(x, -1)))
    for width in (1, 7, 8, 9, 15, 16, 17, 33, 512, 515):
        x = torch.randn(6, width)
        for got, want in zip(compiled(x), (x.sum(-1), x.amax(-1), torch.softmax(x, -1)), strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
