"""The graph cache with the Triton generator: graphs compiled to Triton kernels are saved and loaded.

As in test_triton_path.py, `TritonBackend(device_type="cpu")` stands in for the CUDA backend and runs
the kernels in Triton's interpreter (TRITON_INTERPRET=1, as nox sets it).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
import frontend.graph_cache.lookup as lookup
import frontend.graph_cache.store as store
from frontend.backends import inductor as inductor_backend
from frontend.config import Config

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 (set by nox)")


@pytest.fixture
def triton_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh cache folder, graph cache on, every graph compiled by the Triton generator on CPU."""
    import codegen_triton

    def triton_on_cpu(device_type: str, config: Config) -> Any:
        options = codegen_triton.TritonBackend.parse_options(config.kernel_backend_options("cuda"))
        return codegen_triton.TritonBackend("cpu", options)

    monkeypatch.setattr(inductor_backend, "load_kernel_backend", triton_on_cpu)
    monkeypatch.setattr(store, "_REPORTED", set())
    monkeypatch.setattr(lookup, "_STORES", {})
    frontend.reset()
    with frontend.config.patch(cache_dir=tmp_path, graph_cache=True, fallback_to_eager=False):
        yield tmp_path
    frontend.reset()


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 5))


def _train_step(model: torch.nn.Module) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One forward and backward of `model` (compiled) on fixed inputs: the output and the gradients."""
    compiled = frontend.compile(model)
    x = torch.randn(8, 12, generator=torch.Generator().manual_seed(1))
    cotangent = torch.randn(8, 5, generator=torch.Generator().manual_seed(3))
    out = compiled(x)
    (out * cotangent).sum().backward()
    return out.detach(), [p.grad for p in model.parameters() if p.grad is not None]


def _cache_counts() -> dict[str, dict[str, int]]:
    counts = frontend.compile_times("cache")
    assert isinstance(counts, dict)
    return counts  # type: ignore[return-value]


def test_a_second_compile_loads_the_triton_graph(triton_cache: Path) -> None:
    eager = _model()
    first_out, first_grads = _train_step(_model())
    assert _cache_counts()["graph"] == {"hits": 0, "misses": 1}
    assert list(triton_cache.glob("graphs/*/*.kgc")), "the Triton graph was not saved"

    # A new process: capture's compiled code, the counters and the in-memory entries are gone.
    frontend.reset()
    lookup._STORES.clear()
    out, grads = _train_step(_model())
    assert _cache_counts()["graph"] == {"hits": 1, "misses": 0}
    seconds = frontend.compile_times("dict")
    assert isinstance(seconds, dict) and seconds["codegen"] == seconds["compile"] == 0.0
    assert torch.equal(out, first_out)
    assert all(torch.equal(g, f) for g, f in zip(grads, first_grads, strict=True))
    x = torch.randn(8, 12, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(out, copy.deepcopy(eager)(x).detach(), rtol=1e-4, atol=1e-4)
