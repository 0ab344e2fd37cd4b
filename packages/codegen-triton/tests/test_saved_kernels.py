"""Saving compiled Triton graphs and loading them in a fresh backend (CPU tier: Triton's interpreter).

Each case compiles a graph, saves it with `inductor_ir.save_compiled_graph` (the backend's
`export_kernels`), pickles the record, and loads it with `inductor_ir.load_saved_graph` in a new
backend with its own cache folder that may not generate a kernel; the loaded graph must match eager on
fresh inputs.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from codegen_triton import TritonBackend, TritonConfig
from codegen_triton.runtime.autotune import LaunchConfig
from codegen_triton.saved import SavedTritonKernels, TunedLaunch


def _pointwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.sin(x) * y + x.t())


def _reductions(x: torch.Tensor, long: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # softmax: a persistent reduction; a long sum to few outputs: a split reduction.
    return torch.softmax(x, -1), long.sum(0), (long > 2).any(0)


def _symbolic(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.sigmoid(x) * w, torch.softmax(x, -1), x.sum(0)


def _no_generating(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a loaded graph generated a kernel")


def _fresh_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **config: Any) -> TritonBackend:
    """A new backend with an empty cache folder of its own, which may not generate kernels."""
    backend = TritonBackend("cpu", TritonConfig(cache_dir=tmp_path / "fresh", **config))
    monkeypatch.setattr(backend, "_generate", _no_generating)
    return backend


def _save_and_load(
    compiled: inductor_ir.CompiledGraph, backend: TritonBackend, fresh: TritonBackend
) -> tuple[inductor_ir.SavedGraph, inductor_ir.LoadedGraph]:
    saved = inductor_ir.save_compiled_graph(compiled, {"cpu": backend})
    restored = dataclasses.replace(saved, kernels=_pickled(saved.kernels))
    return restored, inductor_ir.load_saved_graph(restored, {"cpu": fresh})


def _pickled(kernels: tuple[inductor_ir.KernelArtifact, ...]) -> tuple[inductor_ir.KernelArtifact, ...]:
    """The kernel records after a trip through pickle (the wrapper's constants are the caller's concern)."""
    restored = pickle.loads(pickle.dumps(kernels))
    assert restored == kernels
    return restored


def _assert_matches(actual: Any, expected: Any) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


CASES: dict[str, tuple[Callable[..., Any], Callable[[], list[torch.Tensor]]]] = {
    "pointwise": (_pointwise, lambda: [torch.randn(12, 12), torch.randn(12)]),
    "reductions": (_reductions, lambda: [torch.randn(6, 40), torch.randn(9000, 3)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_loaded_graph_matches_eager(
    name: str, cpu_backend: TritonBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fn, make_inputs = CASES[name]
    example = make_inputs()
    gm = make_fx(fn, decomposition_table=inductor_ir.decompositions())(*example)
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": cpu_backend})
    _assert_matches(compiled(*example), fn(*example))
    saved, loaded = _save_and_load(compiled, cpu_backend, _fresh_backend(tmp_path, monkeypatch))
    fresh = make_inputs()
    _assert_matches(loaded(*fresh), fn(*fresh))
    (artifact,) = saved.kernels
    assert isinstance(artifact.payload, SavedTritonKernels)
    assert artifact.names == tuple(source.name for source in compiled.sources)
    if name == "reductions":
        kinds = {kernel.generated.kind for kernel in artifact.payload.kernels}
        assert "persistent" in kinds
        assert any(kernel.generated.split for kernel in artifact.payload.kernels), "no split reduction"


def test_a_graph_with_symbolic_sizes_serves_every_size_and_its_int64_variant(
    cpu_backend: TritonBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def inputs(n: int) -> list[torch.Tensor]:
        return [torch.randn(n, n + 3), torch.randn(n + 3)]

    with torch.no_grad():
        gm = make_fx(_symbolic, tracing_mode="symbolic", decomposition_table=inductor_ir.decompositions())(*inputs(9))
    fakes = [node.meta["val"] for node in gm.graph.nodes if node.op == "placeholder"]
    compiled = inductor_ir.compile_graph(gm, fakes, backends={"cpu": cpu_backend})
    saved, loaded = _save_and_load(compiled, cpu_backend, _fresh_backend(tmp_path, monkeypatch))
    assert not saved.static
    (artifact,) = saved.kernels
    variants = [kernel.int64 for kernel in artifact.payload.kernels]
    assert variants and all(v is not None and ".to(tl.int64)" in v.source for v in variants)
    for n in (2, 7, 33):
        example = inputs(n)
        _assert_matches(loaded(*example), _symbolic(*example))
    # Past int32 range (made small here) a loaded kernel switches to its saved int64 variant.
    monkeypatch.setattr("codegen_triton.backend._INT32_MAX", 16)
    other = _fresh_backend(tmp_path, monkeypatch)
    _, again = _save_and_load(compiled, cpu_backend, other)
    example = inputs(5)
    _assert_matches(again(*example), _symbolic(*example))
    assert all(".to(tl.int64)" in call.generated.source for call in other._calls.values())


def test_autotuned_choices_travel_with_the_kernels(
    cpu_backend: TritonBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import codegen_triton.runtime.launcher as launcher

    # Pretend the tensors are on a GPU named "Fake GPU" whose timing picks the last candidate.
    monkeypatch.setattr(launcher, "_device_of", lambda args: "fake")
    monkeypatch.setattr(launcher, "_device_name", lambda device: "Fake GPU")
    monkeypatch.setattr(launcher, "benchmark_configs", lambda configs, launch, reps: (configs[-1], []))
    backend = TritonBackend("cpu", cpu_backend.config.replace(cache_dir=tmp_path / "first", max_configs=8))
    x = torch.randn(4096)
    gm = make_fx(torch.sin)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": backend})
    compiled(x)
    saved = inductor_ir.save_compiled_graph(compiled, {"cpu": backend})
    ((kernel,),) = (artifact.payload.kernels for artifact in saved.kernels)
    (tuned,) = kernel.tuning
    assert isinstance(tuned, TunedLaunch) and tuned.device == "Fake GPU"
    assert tuned.config == LaunchConfig({"XBLOCK": 128}, 1) and tuned.function == kernel.generated.name

    def no_benchmarking(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the saved choice should have been used")

    monkeypatch.setattr(launcher, "benchmark_configs", no_benchmarking)
    fresh = _fresh_backend(tmp_path, monkeypatch, max_configs=8)
    loaded = inductor_ir.load_saved_graph(dataclasses.replace(saved, kernels=_pickled(saved.kernels)), {"cpu": fresh})
    y = torch.randn(4096)
    torch.testing.assert_close(loaded(y), torch.sin(y))
    (call,) = fresh._calls.values()
    assert list(call.launcher._chosen.values()) == [tuned.config]


def test_foreign_records_are_refused(cpu_backend: TritonBackend, tmp_path: Path) -> None:
    x = torch.randn(8, 8)
    compiled = inductor_ir.compile_graph(make_fx(torch.cos)(x), [x], backends={"cpu": cpu_backend})
    (artifact,) = inductor_ir.save_compiled_graph(compiled, {"cpu": cpu_backend}).kernels
    fresh = TritonBackend("cpu", TritonConfig(cache_dir=tmp_path))
    assert isinstance(fresh, inductor_ir.ReloadableKernelBackend)
    cuda_payload = dataclasses.replace(artifact.payload, device_type="cuda")
    with pytest.raises(ValueError, match="saved for 'cuda' devices"):
        fresh.load_kernels(dataclasses.replace(artifact, device_type="cuda", payload=cuda_payload))
    with pytest.raises(TypeError, match="not a Triton kernel record"):
        fresh.load_kernels(dataclasses.replace(artifact, payload={"kernels": []}))
    # A kernel this backend did not compile cannot be exported (the graph is then not saved).
    with pytest.raises(LookupError, match="not compiled by this backend"):
        fresh.export_kernels(compiled.sources)


def test_a_cpp_record_is_refused(cpu_backend: TritonBackend) -> None:
    saved_library = pytest.importorskip("codegen_cpp.saved")
    spec = saved_library.KernelSpec("cpp_fused_cos_0", 2, 0, None, "cos")
    payload = saved_library.SavedLibrary(("// C++",), (spec,), "g++ 13", b"")
    artifact = inductor_ir.KernelArtifact("cpu", ("cpp_fused_cos_0",), payload)
    with pytest.raises(TypeError, match="not a Triton kernel record: SavedLibrary"):
        cpu_backend.load_kernels(artifact)
