"""Repository-wide pytest setup: the `gpu` tier is skipped on machines without CUDA, and tests marked
`fake_unique_int64` where torch's fake `unique` kernel gives its inverse indices and counts the input's
dtype (some torch releases; Kiln then runs `unique` eagerly, so those tests have nothing to compile).
Every test starts from random seeds of its own, fixed by its name, so a test's random inputs are the
same on every run and on every machine."""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _seeded_random_inputs(request: pytest.FixtureRequest) -> Iterator[None]:
    """Seed Python's and torch's generators from the test's id (stable across runs and workers)."""
    import torch

    seed = zlib.crc32(request.node.nodeid.encode())
    random.seed(seed)
    torch.manual_seed(seed)
    yield


def _fake_unique_gives_int64() -> bool:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv())
    with mode:
        _, counts = torch.unique(mode.from_tensor(torch.ones(3)), return_counts=True)
    return counts.dtype == torch.int64


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if any("fake_unique_int64" in item.keywords for item in items) and not _fake_unique_gives_int64():
        skip_unique = pytest.mark.skip(reason="this torch's fake unique kernel gives counts the input's dtype")
        for item in items:
            if "fake_unique_int64" in item.keywords:
                item.add_marker(skip_unique)
    if has_cuda:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
