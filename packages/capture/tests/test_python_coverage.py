"""Python that real code runs inside captured functions and that stays in one graph: existing dicts keyed
by tuples and dtypes, library options objects (frozen dataclasses) and `torch.library.custom_op` functions,
pytree helpers called in user code, and builtins or library callables mixing tensors and Python values.
Each is compared with eager on seeded inputs, with its graph count."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from capture_helpers import RecordingBackend

import capture


def _compile(fn: Any, **options: Any) -> tuple[Any, RecordingBackend]:
    backend = RecordingBackend()
    return capture.optimize(backend, nopython=True, **options)(fn), backend


def _randn(seed: int, *shape: int, **kwargs: Any) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), **kwargs)


_BY_DEVICE_AND_DTYPE = {("cpu", torch.float16): ("half", 2.0), ("cpu", torch.float32): ("single", 3.0),
                        (1, None): 0.5}


def test_existing_dict_with_tuple_and_dtype_keys() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, str]:
        mode, scale = _BY_DEVICE_AND_DTYPE.get((x.device.type, x.dtype), ("other", 1.0))
        shift = _BY_DEVICE_AND_DTYPE[(1, None)]
        count = sum(1 for key in _BY_DEVICE_AND_DTYPE if key[0] == x.device.type)
        return x * scale + shift + count, mode

    compiled, backend = _compile(f)
    for dtype in (torch.float32, torch.float16, torch.float64):
        x = _randn(0, 3, 4).to(dtype)
        result, mode = compiled(x)
        expected, expected_mode = f(x)
        torch.testing.assert_close(result, expected)
        assert mode == expected_mode
    assert backend.count == 3  # one graph per dtype (each picks a different entry)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_linear_cross_entropy_chunked_options(reduction: str) -> None:
    from torch.nn.modules.linear_cross_entropy_options import LinearCrossEntropyOptions

    options = LinearCrossEntropyOptions(allow_retain_graph=True, batch_chunk_size=3)

    def f(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.linear_cross_entropy(x, w, target, reduction=reduction, options=options)

    compiled, backend = _compile(f)
    target = torch.randint(0, 10, (8,), generator=torch.Generator().manual_seed(2))
    results = []
    for run in (compiled, f):
        x = _randn(0, 8, 4, requires_grad=True)
        w = _randn(1, 10, 4, requires_grad=True)
        loss = run(x, w, target)
        loss.sum().backward()
        results.append((loss, x.grad, w.grad))
    torch.testing.assert_close(results[0], results[1])
    assert backend.count == 1
