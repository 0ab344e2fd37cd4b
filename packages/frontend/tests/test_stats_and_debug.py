"""compile_times() accounting and KILN_DEBUG output."""

from __future__ import annotations

from pathlib import Path

import torch

import frontend
from frontend.backends.registry import lookup_backend
from frontend.context import CompileContext
from frontend.stats import CompileTimes, move_seconds


def test_nested_stages_are_charged_exclusively() -> None:
    now = [100.0]
    times = CompileTimes(clock=lambda: now[0])
    with times.stage("aotgrad"):
        now[0] += 2.0
        with times.stage("lowering"):
            now[0] += 3.0
            with times.stage("compile"):
                now[0] += 5.0
        now[0] += 1.0
    assert times.seconds == {"aotgrad": 3.0, "lowering": 3.0, "compile": 5.0}
    assert times.total() == 11.0
    move_seconds(times, "lowering", {"codegen": 1.0})
    assert times.seconds["codegen"] == 1.0 and times.seconds["lowering"] == 2.0
    report = times.report()
    for stage in ("capture", "aotgrad", "lowering", "scheduling", "codegen", "compile"):
        assert stage in report


def test_compile_times_forms() -> None:
    as_dict = frontend.compile_times(repr="dict")
    assert isinstance(as_dict, dict) and "capture" in as_dict
    assert "Kiln compile times" in str(frontend.compile_times())


def test_debug_folder_gets_the_graph(tmp_path: Path, capsys: object) -> None:
    config = frontend.Config().with_options({"debug": True, "debug_dir": tmp_path})
    context = CompileContext.for_config(config, "my_function")
    gm = torch.fx.symbolic_trace(lambda x: torch.relu(x) * 2)
    artifacts = context.new_artifacts()
    assert artifacts is not None
    artifacts.write_graph("fx_graph.py", gm)
    with context.stage("lowering", artifacts):
        pass
    compiled = lookup_backend("eager")(gm, [torch.randn(3)], context)
    x = torch.randn(3)
    assert torch.equal(compiled(x), torch.relu(x) * 2)
    (run,) = tmp_path.glob("run_*")
    (graph_folder,) = run.glob("my_function_graph*")
    assert "relu" in (graph_folder / "fx_graph.py").read_text()
    assert "lowering" in (graph_folder / "timings.json").read_text()


def test_context_records_each_generated_kernel_forward_and_backward() -> None:
    frontend.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.LayerNorm(8))
    compiled = frontend.compile(model, options={"graph_cache": False})  # generated here, not loaded from a cache
    x = torch.randn(4, 8)
    compiled(x).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for got, expected in zip(grads, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(got, expected)
    kernels = compiled.kiln_context.kernels
    assert kernels and all(k.device == "cpu" and k.ops >= 1 and k.name.isidentifier() for k in kernels)
    largest = max(kernels, key=lambda k: k.ops)
    assert largest.ops >= 3 and "relu" in largest.name, kernels
