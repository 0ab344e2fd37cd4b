"""Repro scripts on a crash, the accuracy minifier, and ``python -m frontend.minify``.

Faults are injected into inductor_ir's lowering of ``aten.sin`` (see fault_injection.py): a broken
lowering must produce a repro script that crashes the same way when run as a program (with the
same fault installed), and that runs clean without it; a wrong kernel must be found by the
accuracy level and minified to at most 3 nodes. Every compile uses a fresh cache folder so a
faulty kernel never reaches another test.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
from frontend.errors import BackendCompileError
from frontend.minify import main as minify_main
from frontend.repro import ReproSpec, render_script, run_repro, shrink
from frontend.repro.shrink import operations
from frontend.repro.stages import as_graph_module

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
import fault_injection  # noqa: E402  (a helper beside this file, also imported by the subprocesses)

REPRO_PATH = re.compile(r"repro script(?: of the failing graph)?: (\S+\.py)")


@pytest.fixture
def isolated(tmp_path: Path, fresh_cache: None) -> Iterator[Path]:
    """A fresh cache folder for this test's compiles (and its repro scripts under it)."""
    with frontend.config.patch(cache_dir=tmp_path / "cache"):
        yield tmp_path


def _run(command: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    env["KILN_CACHE_DIR"] = str(cache)
    env.pop("KILN_REPRO_AFTER", None)
    env.pop("KILN_REPRO_LEVEL", None)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def sine_chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = torch.relu(x) * 2
    b = torch.tanh(y) + a
    c = torch.sin(b) * 3
    d = c.sum(dim=1, keepdim=True) + b
    return torch.exp(d * 0.1) - a


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return torch.randn(8, 5), torch.randn(8, 5)


@pytest.mark.parametrize("after", ["capture", "aotgrad"])
def test_broken_lowering_writes_a_repro_that_crashes_when_run(
    after: str, isolated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fault_injection.break_sin(_patched_registry(monkeypatch))
    compiled = frontend.compile(sine_chain, options={"repro_after": after, "repro_dir": isolated / "repros"})
    x, y = _inputs()
    with caplog.at_level(logging.WARNING, logger="kiln"):
        result = compiled(x, y)
    torch.testing.assert_close(result, sine_chain(x, y))  # the graph fell back to eager: still right
    fallback = [r.getMessage() for r in caplog.records if r.name == "kiln.fallbacks"]
    assert fallback and "repro script" in fallback[0], fallback
    script = Path(REPRO_PATH.search(fallback[0]).group(1))  # type: ignore[union-attr]
    assert script.parent == isolated / "repros" and script.exists()
    text = script.read_text()
    assert f"'after': {after!r}" in text.replace('"after": ', "'after': ")
    assert fault_injection.MESSAGE in text  # the docstring says what was seen

    crashed = _run(fault_injection.run_with_fault("break_sin", str(script)), isolated / "cache")
    assert crashed.returncode != 0, crashed.stderr
    assert fault_injection.MESSAGE in crashed.stderr
    if after == "aotgrad":  # without the fault the same script runs clean (once is enough: it is slow)
        clean = _run([sys.executable, str(script)], isolated / "cache")
        assert clean.returncode == 0, clean.stderr
        assert "did not reproduce" in clean.stderr


def _patched_registry(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The lowering registry, with this test's change to aten.sin undone afterwards."""
    from inductor_ir.lowering.registry import LOWERINGS

    monkeypatch.setitem(LOWERINGS, fault_injection.SIN, LOWERINGS[fault_injection.SIN])
    return LOWERINGS


def test_error_without_fallback_names_the_repro(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fault_injection.break_sin(_patched_registry(monkeypatch))
    options = {"repro_after": "aotgrad", "repro_dir": isolated / "repros", "fallback_to_eager": False}
    compiled = frontend.compile(sine_chain, options=options)
    with pytest.raises(Exception) as raised:  # capture names the backend around Kiln's BackendCompileError
        compiled(*_inputs())
    assert "BackendCompileError" in str(raised.value) or isinstance(raised.value, BackendCompileError)
    found = REPRO_PATH.search(str(raised.value))
    assert found is not None and Path(found.group(1)).exists(), str(raised.value)


def test_wrong_kernel_is_minified_to_at_most_three_nodes(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fault_injection.wrong_sin(_patched_registry(monkeypatch))
    folder = isolated / "repros"
    compiled = frontend.compile(sine_chain, options={"repro_level": "accuracy", "repro_dir": folder})
    compiled(*_inputs())
    found = re.search(r"accuracy repro: (\S+\.py)", capsys.readouterr().err)
    assert found is not None
    script = Path(found.group(1))
    namespace: dict[str, Any] = {"__name__": "kiln_repro"}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    gm = as_graph_module(namespace["Repro"]())
    assert len(list(gm.graph.nodes)) <= 3, gm.graph  # placeholder, sin, output
    assert [node.target for node in operations(gm)] == [torch.ops.aten.sin.default]

    wrong = _run(fault_injection.run_with_fault("wrong_sin", str(script)), isolated / "cache")
    assert wrong.returncode != 0 and "ReproducedMismatch" in wrong.stderr, wrong.stderr


def test_accuracy_level_is_silent_when_kernels_are_right(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    compiled = frontend.compile(sine_chain, options={"repro_level": "accuracy", "repro_dir": isolated / "repros"})
    x, y = _inputs()
    torch.testing.assert_close(compiled(x, y), sine_chain(x, y))
    assert "accuracy repro" not in capsys.readouterr().err
    assert not (isolated / "repros").exists()


def test_minify_cli_shrinks_a_full_repro(isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fault_injection.break_sin(_patched_registry(monkeypatch))
    x, y = _inputs()
    gm = torch.fx.symbolic_trace(_SineModule())
    spec = ReproSpec("capture", "inductor", "crash", {})
    script = isolated / "full.py"
    script.write_text(render_script(gm, [x, y], spec, 1 << 20))
    assert minify_main([str(script)]) == 0
    output = capsys.readouterr().out
    assert re.search(r"minified \d+ -> 1 ops", output) and fault_injection.MESSAGE in output, output
    small = script.with_name("full_min.py")
    namespace: dict[str, Any] = {"__name__": "kiln_repro"}
    exec(compile(small.read_text(), str(small), "exec"), namespace)
    with pytest.raises(Exception, match="deliberately broken"):
        run_repro(namespace["Repro"](), namespace["make_inputs"](), **namespace["KILN_REPRO"])


class _SineModule(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return sine_chain(x, y)


def test_minify_cli_says_when_nothing_fails(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gm = torch.fx.symbolic_trace(_SineModule())
    script = isolated / "fine.py"
    script.write_text(render_script(gm, list(_inputs()), ReproSpec("aotgrad", "aot_eager", "crash", {}), 0))
    assert minify_main([str(script)]) == 1
    assert "does not fail" in capsys.readouterr().err


def test_shrink_finds_the_one_culprit_node() -> None:
    gm = torch.fx.symbolic_trace(_SineModule())
    calls: list[int] = []

    def has_sine(candidate: torch.fx.GraphModule, inputs: list[Any]) -> bool:
        calls.append(1)
        candidate(*inputs)  # every candidate stands alone and runs
        return any(node.target is torch.sin for node in candidate.graph.nodes)

    shrunk = shrink(gm, list(_inputs()), has_sine)
    assert [node.target for node in operations(shrunk.graph_module)] == [torch.sin]
    assert shrunk.tries == len(calls) < 20


def test_repro_script_rebuilds_modules_and_parameters(isolated: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.LayerNorm(4))
    seen: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def keep(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
        seen.append((gm, inputs))
        return gm.forward

    x = torch.randn(3, 5)
    frontend.compile(model, backend=keep)(x)
    gm, inputs = seen[0]
    script = isolated / "module.py"
    script.write_text(render_script(gm, inputs, ReproSpec("capture", "eager", "accuracy", {}), 1 << 20))
    namespace: dict[str, Any] = {"__name__": "kiln_repro"}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    rebuilt = namespace["Repro"]()
    torch.testing.assert_close(rebuilt(*namespace["make_inputs"]())[0], model(x))  # saved weights and inputs
    ran = _run([sys.executable, str(script)], isolated / "cache")
    assert ran.returncode == 0 and "did not reproduce" in ran.stderr, ran.stderr


def test_a_raising_backend_gets_a_repro_note(isolated: Path) -> None:
    def sine_hater(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        if any(node.target is torch.sin for node in gm.graph.nodes):
            raise ValueError("this backend rejects sines")
        return gm.forward

    frontend.register_backend(sine_hater, name="kiln_test_sine_hater")
    compiled = frontend.compile(
        sine_chain, backend="kiln_test_sine_hater", options={"repro_after": "capture", "repro_dir": isolated / "repros"}
    )
    with pytest.raises(Exception, match="rejects sines") as raised:
        compiled(*_inputs())
    chain: list[BaseException] = [raised.value]
    while chain[-1].__cause__ is not None:  # capture re-raises it, naming the backend: the note is on the original
        chain.append(chain[-1].__cause__)  # type: ignore[arg-type]
    notes = "\n".join(note for error in chain for note in getattr(error, "__notes__", []))
    found = REPRO_PATH.search(notes)
    assert found is not None, notes
    namespace: dict[str, Any] = {"__name__": "kiln_repro"}
    script = Path(found.group(1))
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    with pytest.raises(ValueError, match="rejects sines"):  # the backend is registered in this process
        run_repro(namespace["Repro"](), namespace["make_inputs"](), **namespace["KILN_REPRO"])


def test_script_survives_any_error_text_and_shrink_stops_at_its_budget() -> None:
    gm = torch.fx.symbolic_trace(_SineModule())
    inputs = list(_inputs())
    text = render_script(gm, inputs, ReproSpec("aotgrad", "inductor", "crash", {}, 'odd \\ """ text'), 0)
    compile(text, "repro.py", "exec")  # still valid Python
    shrunk = shrink(gm, inputs, lambda candidate, values: True, max_tries=3)
    assert shrunk.tries == 3 and len(operations(shrunk.graph_module)) < len(operations(gm))
