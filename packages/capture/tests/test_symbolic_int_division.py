"""Python's floor division and modulo of symbolic sizes by divisors that may be negative.

torch's ShapeEnv folds ``(s // -3) // -3`` into ``s // 9``, which holds only for positive
divisors: a graph compiled at one size then computed 0 for 7 where Python gives 1. Found by the
Python-level fuzzer (`tools/pyfuzz`, seed 7145).
"""

from __future__ import annotations

import torch
from capture_helpers import RecordingBackend

import capture


def _divisions(x: torch.Tensor) -> tuple[torch.Tensor, int, int, int, int]:
    n = len(x)
    twice = (n // -3) // -3
    modulo = (n % -4) % 3
    positive = (n // 2) // 2  # positive divisors stay symbolic
    return x * 2, twice, modulo, positive, n // len(x[0])


def test_floor_division_and_modulo_of_sizes_match_python_at_every_size() -> None:
    capture.reset()
    backend = RecordingBackend()
    compiled = capture.optimize(backend)(_divisions)
    for rows in (4, 6, 7, 8, 11, 7):
        x = torch.randn(rows, 3, generator=torch.Generator().manual_seed(rows))
        got, want = compiled(x), _divisions(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:], (rows, got[1:], want[1:])
