"""The user tools around compile: profiler, KILN_LOGS, KILN_DEBUG, compile_times, run, capture re-exports."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

import frontend

pytestmark = pytest.mark.usefixtures("fresh_cache")


def _pointwise(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * torch.cos(y) + 1


def test_compile_profiler_reports_recompilations() -> None:
    def toy(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * b + 1

    with frontend.CompileProfiler() as prof:
        profiled = frontend.compile(toy, backend=prof)
        for size in (4, 5):
            a, b = torch.randn(size), torch.randn(size)
            torch.testing.assert_close(profiled(a, b), toy(a, b))
    report = prof.report()
    assert "graphs compiled: 2" in report
    assert len(prof.recompilations) == 1
    assert "guard" in report


def test_inductor_generates_kernels_without_falling_back(tmp_path: Path) -> None:
    before = frontend.compile_times(repr="dict")
    assert isinstance(before, dict)
    with frontend.config.patch(debug=True, debug_dir=tmp_path, fallback_to_eager=False):
        compiled = frontend.compile(_pointwise)
    x, y = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(compiled(x, y), _pointwise(x, y))
    (graph_folder,) = tmp_path.glob("run_*/_pointwise_graph*")
    generated = {p.name for p in (graph_folder / "forward").iterdir()}
    assert {"ir.txt", "wrapper.py"} <= generated
    assert any(name.startswith("kernel") for name in generated)
    after = frontend.compile_times(repr="dict")
    assert isinstance(after, dict)
    for stage in ("capture", "aotgrad", "lowering", "codegen", "compile"):
        assert after[stage] > before[stage], stage


def test_kiln_logs_graph_breaks_with_user_line(caplog: pytest.LogCaptureFixture) -> None:
    def breaks(a: torch.Tensor) -> torch.Tensor:
        a = a + 1
        print("woo")
        return a * 2

    with frontend.config.patch(logs=frozenset({"graph_breaks", "recompiles", "guards"})):
        compiled = frontend.compile(breaks, backend="eager")
    with caplog.at_level(logging.WARNING, logger="kiln"):
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), breaks(x))
    assert 'print("woo")' in caplog.text
    assert "test_tools.py" in caplog.text


def test_kiln_debug_writes_every_stage(tmp_path: Path) -> None:
    with frontend.config.patch(debug=True, debug_dir=tmp_path):
        compiled = frontend.compile(_pointwise, backend="aot_eager")
    x, y = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4)
    compiled(x, y).sum().backward()
    (graph_folder,) = tmp_path.glob("run_*/_pointwise_graph*")
    names = {p.name for p in graph_folder.rglob("*")}
    assert {"fx_graph.py", "aten_forward.py", "aten_backward.py", "timings.json"} <= names
    assert "sin" in (graph_folder / "aten_forward.py").read_text()


def test_forward_hooks_of_the_original_module_run() -> None:
    model = torch.nn.Linear(5, 5)
    seen: list[torch.Size] = []
    model.register_forward_hook(lambda module, args, output: seen.append(output.shape))
    compiled = frontend.compile(model, backend="eager")
    x = torch.randn(2, 5)
    torch.testing.assert_close(compiled(x), model(x))
    assert len(seen) == 2


def test_run_freezes_a_compiled_module() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(5, 5), torch.nn.Tanh())
    compiled = frontend.compile(model, backend="eager")
    x = torch.randn(2, 5)
    torch.testing.assert_close(compiled(x), model(x))
    graphs = compiled.kiln_context.graphs_compiled
    frozen = frontend.run(compiled)
    y = torch.randn(9, 5)  # a new shape would recompile; run() runs it eagerly instead
    torch.testing.assert_close(frozen(y), model(y))
    torch.testing.assert_close(frozen(x), model(x))
    assert compiled.kiln_context.graphs_compiled == graphs


def test_capture_tools_reexported() -> None:
    def with_break(x: torch.Tensor) -> torch.Tensor:
        x = x + 1
        frontend.graph_break()
        return x * 2

    compiled = frontend.compile(with_break, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), (x + 1) * 2)
    assert compiled.kiln_context.graphs_compiled == 2
    assert compiled.kiln_context.graph_breaks == 1

    frozen = frontend.run(compiled)
    before = compiled.kiln_context.graphs_compiled
    y = torch.randn(7)  # a new shape: run() never compiles, it runs eagerly
    torch.testing.assert_close(frozen(y), (y + 1) * 2)
    assert compiled.kiln_context.graphs_compiled == before

    @frontend.disable
    def untouched(x: torch.Tensor) -> torch.Tensor:
        return x - 1

    torch.testing.assert_close(frontend.compile(untouched, backend="eager")(x), x - 1)
