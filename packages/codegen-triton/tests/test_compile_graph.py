"""The backend end to end: `inductor_ir.compile_graph` on ATen graphs from `make_fx`, compared with eager.

Each case runs in Triton's interpreter on CPU tensors (`TritonBackend(device_type="cpu")`), and, marked
`gpu`, as real kernels on a CUDA device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend, TritonConfig


@dataclass(frozen=True)
class Case:
    """A function, a factory of fresh random inputs, and what its kernels must look like."""

    name: str
    fn: Callable[..., Any]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    kernel_prefixes: tuple[str, ...] = ()
    tracing_mode: str = "real"
    tolerance: float = 1e-4


def _randn(*size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*size).to(dtype)


CASES = [
    Case(
        "pointwise_broadcast",
        lambda x, b: torch.relu(x * 2 + b),
        lambda: (_randn(6, 8), _randn(8)),
        ("triton_poi",),
    ),
    Case("transposed_input", lambda x, y: x.t() + y, lambda: (_randn(8, 12), _randn(12, 8)), ("triton_poi",)),
    Case("inner_reduction_small", lambda x: x.sum(-1), lambda: (_randn(7, 33),), ("triton_per",)),
    Case("outer_reduction", lambda x: x.sum(0), lambda: (_randn(33, 7),), ("triton_per",)),
    Case(
        "inner_reduction_large", lambda x: x.amax(-1) + x.sum(-1), lambda: (_randn(3, 1500),), ("triton_red",)
    ),
    Case("softmax", lambda x: torch.softmax(x, -1), lambda: (_randn(5, 40),), ("triton_per",)),
    Case(
        "layer_norm",
        lambda x, w, b: F.layer_norm(x, (16,), w, b),
        lambda: (_randn(4, 16), _randn(16), _randn(16)),
    ),
    Case("argmax", lambda x: (x.argmax(-1), x.argmin(0)), lambda: (_randn(4, 16).round(),)),
    Case(
        "float16",
        lambda x: (x.sin() * 2).sum(-1),
        lambda: (_randn(4, 16, dtype=torch.float16),),
        (),
        "real",
        1e-2,
    ),
    Case(
        "bfloat16_gelu",
        lambda x: F.gelu(x) + F.silu(x),
        lambda: (_randn(50, dtype=torch.bfloat16),),
        ("triton_poi",),
        "real",
        2e-2,
    ),
    Case(
        "integers_and_bools",
        lambda x, y: ((x // y) + (x % y), x > y, (x > 0).any(-1), (x > 0).all(-1)),
        lambda: (torch.randint(-20, 20, (3, 10)), torch.randint(1, 5, (3, 10))),
    ),
    Case("split_full_sum", lambda x: x.sum() * 2, lambda: (_randn(20000),), ("triton_red",), "real", 1e-3),
    Case(
        "split_bias_grad",
        lambda x: (x.sum(0), x.amax(0)),
        lambda: (_randn(9000, 3),),
        ("triton_red",),
        "real",
        1e-3,
    ),
    Case("dynamic_softmax", lambda x: torch.softmax(x * 2, -1), lambda: (_randn(5, 40),), (), "symbolic"),
]


def _compile(
    case: Case, backend: TritonBackend, inputs: tuple[torch.Tensor, ...], device: str
) -> inductor_ir.CompiledGraph:
    gm = make_fx(case.fn, decomposition_table=inductor_ir.decompositions(), tracing_mode=case.tracing_mode)(
        *inputs
    )
    return inductor_ir.compile_graph(gm, list(inputs), backends={device: backend})


def _check(case: Case, backend: TritonBackend, device: str) -> inductor_ir.CompiledGraph:
    inputs = tuple(t.to(device) for t in case.inputs())
    compiled = _compile(case, backend, inputs, device)
    fresh = tuple(t.to(device) for t in case.inputs())
    got, expected = compiled(*fresh), case.fn(*fresh)
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=case.tolerance, rtol=case.tolerance)
    names = [source.name for source in compiled.sources]
    for prefix in case.kernel_prefixes:
        assert any(name.startswith(prefix) for name in names), names
    return compiled


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_in_interpreter(cpu_backend: TritonBackend, case: Case) -> None:
    _check(case, cpu_backend, "cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_on_gpu(gpu_backend: TritonBackend, case: Case) -> None:
    _check(case, gpu_backend, "cuda")


def _getting_started(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.cos(x) + torch.sin(y)


def _assert_one_fused_kernel(compiled: inductor_ir.CompiledGraph) -> None:
    (source,) = compiled.sources
    text = source.source
    assert source.name.startswith("triton_poi_fused_")
    assert text.count("tl.load(") == 2, text  # each input read once
    assert text.count("tl.store(") == 1, text  # the output written once
    assert "tl.cos(" in text and "tl.sin(" in text


def test_getting_started_example_is_one_fused_kernel(cpu_backend: TritonBackend, tmp_path: Path) -> None:
    backend = TritonBackend("cpu", cpu_backend.config.replace(debug_dir=tmp_path))
    case = Case("trig", _getting_started, lambda: (_randn(10000), _randn(10000)))
    compiled = _check(case, backend, "cpu")
    _assert_one_fused_kernel(compiled)
    (written,) = (tmp_path / "kernels").iterdir()
    assert written.read_text() == compiled.sources[0].source


@pytest.mark.gpu
def test_getting_started_example_on_gpu(gpu_backend: TritonBackend) -> None:
    case = Case("trig", _getting_started, lambda: (_randn(10000), _randn(10000)))
    _assert_one_fused_kernel(_check(case, gpu_backend, "cuda"))


@pytest.mark.gpu
def test_autotuning_caches_the_winner_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = TritonBackend(config=TritonConfig(cache_dir=tmp_path, autotune=True, max_configs=3))
    case = Case("softmax", lambda x: torch.softmax(x, -1), lambda: (_randn(64, 3000),))
    _check(case, backend, "cuda")
    assert list((tmp_path / "triton" / "tuning").glob("*.json"))

    def no_benchmarking(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the tuning cache should have answered")

    # A fresh compile of the same graph reads the winner from disk instead of timing again.
    monkeypatch.setattr("codegen_triton.runtime.launcher.benchmark_configs", no_benchmarking)
    fresh_backend = TritonBackend(config=TritonConfig(cache_dir=tmp_path, autotune=True, max_configs=3))
    _check(case, fresh_backend, "cuda")


def test_random_numbers_in_kernel(cpu_backend: TritonBackend) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.rand_like(x) < 0.5, x * 2, torch.zeros_like(x))

    x = torch.rand(4000) + 1.0  # never zero: a zero in the output means "dropped"
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": cpu_backend})
    assert any("tl.rand(" in source.source for source in compiled.sources)
    out = compiled(x)
    kept = out != 0
    torch.testing.assert_close(out[kept], x[kept] * 2)
    assert 0.4 < float(kept.float().mean()) < 0.6
    strict = TritonBackend("cpu", cpu_backend.config.replace(fallback_random=True))
    # Under fallback_random the random op runs as an ATen call (eager's numbers); a kernel that
    # still drew random numbers would be refused.
    exact = inductor_ir.compile_graph(gm, [x], backends={"cpu": strict})
    assert not any("tl.rand(" in source.source for source in exact.sources)
    torch.manual_seed(3)
    got = exact(x)
    torch.manual_seed(3)
    assert torch.equal(got, fn(x))
    drawing = next(source for source in compiled.sources if "tl.rand(" in source.source)
    with pytest.raises(NotImplementedError, match="fallback_random"):
        strict.generate(drawing.group)


def test_long_reductions_to_few_outputs_are_split(cpu_backend: TritonBackend) -> None:
    case = Case("split", lambda x: (x.sum(0), (x > 2).any(0)), lambda: (_randn(9000, 3),))
    compiled = _check(case, cpu_backend, "cpu")
    (source,) = compiled.sources
    assert source.name.endswith("_split") and "_finish(" in source.source
    assert "rsplit = tl.program_id(1)" in source.source
    unsplit = TritonBackend("cpu", cpu_backend.config.replace(split_reductions=False))
    (plain,) = _check(case, unsplit, "cpu").sources
    assert not plain.name.endswith("_split")
