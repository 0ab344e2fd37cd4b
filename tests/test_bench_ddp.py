"""tools/bench/ddp.py's overlap measure: how much communication time compute kernels hid."""

from __future__ import annotations

import pytest

from tools.bench.ddp import overlap_of


def test_overlap_counts_communication_hidden_behind_compute() -> None:
    kernels = [
        ("sm90_gemm", 0.0, 100.0),
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 60.0, 160.0),  # 40 us under the gemm, 10 under the relu
        ("triton_poi_fused_relu_0", 140.0, 150.0),
        ("triton_poi_fused_add_1", 145.0, 148.0),  # inside the relu's interval: not counted twice
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 200.0, 220.0),  # exposed
    ]
    overlap = overlap_of(kernels, steps=2)
    assert overlap.comm_ms == pytest.approx(120.0 / 2 / 1e3)
    assert overlap.hidden_ms == pytest.approx(50.0 / 2 / 1e3)
    assert overlap.compute_ms == pytest.approx(110.0 / 2 / 1e3)
    assert overlap.hidden_fraction == pytest.approx(50.0 / 120.0)


def test_no_communication_hides_nothing() -> None:
    overlap = overlap_of([("gemm", 0.0, 5.0)], steps=1)
    assert overlap.comm_ms == 0.0 and overlap.hidden_fraction == 0.0
