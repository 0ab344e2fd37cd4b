"""The graph cache (frontend.graph_cache): compiled graphs reused across processes and shipped in bundles.

In-process tests stand for "a new process" by forgetting capture's compiled code and the cache's
in-memory entries (`new_process`): the next compile then reads the cache folder. Subprocess tests
(`test_concurrent_processes_then_a_warm_one`, `test_bundle_into_another_cache_folder`) run real
processes. Every compiled result is compared with eager on seeded random inputs.
"""

from __future__ import annotations

import copy
import errno
import json
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
import frontend.graph_cache.lookup as lookup
import frontend.graph_cache.store as store
from frontend.graph_cache import InvalidCacheBundleError
from frontend.graph_cache.key import graph_key, key_components

STRICT = {"fallback_to_eager": False}


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 5))


def _inputs(seed: int = 1, rows: int = 8) -> torch.Tensor:
    return torch.randn(rows, 12, generator=torch.Generator().manual_seed(seed))


def _fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (torch.sin(x) * y + x.exp()).sum(dim=1)


def new_process() -> None:
    """What a new process starts without: capture's compiled code, counters, the in-memory entries."""
    frontend.reset()
    lookup._STORES.clear()


def _cache_counts() -> dict[str, dict[str, int]]:
    counts = frontend.compile_times("cache")
    assert isinstance(counts, dict)
    return counts  # type: ignore[return-value]


def _hits(stage: str = "graph") -> int:
    return _cache_counts().get(stage, {}).get("hits", 0)


def _misses(stage: str = "graph") -> int:
    return _cache_counts().get(stage, {}).get("misses", 0)


def _entries(root: Path) -> list[Path]:
    return sorted(root.glob("graphs/*/*.kgc"))


def _train_step_matches_eager(options: dict[str, Any] | None = None, rows: int = 8) -> None:
    """Compile the model, run a training step and an inference call; compare all with eager."""
    model = _model()
    eager = copy.deepcopy(model)
    compiled = frontend.compile(model, options={**STRICT, **(options or {})})
    x = _inputs(rows=rows)
    cotangent = torch.randn(rows, 5, generator=torch.Generator().manual_seed(3))
    out, expected = compiled(x), eager(x)
    torch.testing.assert_close(out, expected)
    (out * cotangent).sum().backward()
    (expected * cotangent).sum().backward()
    for got, want in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(got.grad, want.grad)
    torch.testing.assert_close(model[2].running_mean, eager[2].running_mean)
    with torch.no_grad():
        torch.testing.assert_close(compiled(_inputs(seed=5, rows=rows)), eager(_inputs(seed=5, rows=rows)))


def test_a_new_process_loads_instead_of_compiling(cache_dir: Path) -> None:
    _train_step_matches_eager()
    assert _misses() >= 1 and _hits() == 0
    assert len(_entries(cache_dir)) >= 1
    new_process()
    _train_step_matches_eager()
    assert _misses() == 0 and _hits() >= 1
    seconds = frontend.compile_times("dict")
    assert isinstance(seconds, dict)
    assert seconds["aotgrad"] == seconds["lowering"] == seconds["codegen"] == seconds["compile"] == 0.0
    assert "graph" in str(frontend.compile_times())


def test_turned_off_nothing_is_saved(cache_dir: Path) -> None:
    with frontend.config.patch(graph_cache=False):
        _train_step_matches_eager()
    assert _entries(cache_dir) == [] and _cache_counts() == {}


def test_environment_variable_turns_it_off() -> None:
    from frontend._env import read_environment

    assert read_environment({"KILN_GRAPH_CACHE": "0"}).graph_cache is False
    assert read_environment({}).graph_cache is True


def test_a_changed_option_misses(cache_dir: Path) -> None:
    _train_step_matches_eager()
    new_process()
    _train_step_matches_eager({"runtime_checks": False})
    assert _hits() == 0 and _misses() >= 1


def test_dynamic_shapes_hit_for_other_sizes(cache_dir: Path) -> None:
    def run(rows: int) -> None:
        compiled = frontend.compile(_fn, dynamic=True, options=STRICT)
        x, y = torch.randn(rows, 7), torch.randn(rows, 7)
        torch.testing.assert_close(compiled(x, y), _fn(x, y))

    run(5)
    assert _misses() == 1
    new_process()
    run(9)
    assert _hits() == 1 and _misses() == 0


def test_double_backward_through_a_loaded_graph(cache_dir: Path) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * x).sum()

    def grad_of_grad(compiled: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        x = torch.randn(6, generator=torch.Generator().manual_seed(2)).requires_grad_()
        (grad,) = torch.autograd.grad(compiled(x), x, create_graph=True)
        (second,) = torch.autograd.grad(grad.sum(), x)
        return second

    expected = grad_of_grad(fn)
    torch.testing.assert_close(grad_of_grad(frontend.compile(fn, options=STRICT)), expected)
    new_process()
    torch.testing.assert_close(grad_of_grad(frontend.compile(fn, options=STRICT)), expected)
    assert _hits() == 1


def test_loading_a_graph_builds_no_decomposition_table_until_a_replay_needs_it(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aotgrad.plans as plans
    import inductor_ir

    _train_step_matches_eager()
    new_process()
    built: list[str] = []
    real_with_eager_values = plans.with_eager_values

    def counted(table: Any) -> Any:
        built.append("table")
        return real_with_eager_values(table)

    monkeypatch.setattr(plans, "with_eager_values", counted)
    real_decompositions = inductor_ir.decompositions

    def counted_inductor_table() -> Any:
        built.append("inductor_ir table")
        return real_decompositions()

    monkeypatch.setattr(inductor_ir, "decompositions", counted_inductor_table)
    _train_step_matches_eager()
    assert _hits() >= 1 and built == []  # loaded and trained without either table

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.cos() * x).sum()

    x = torch.randn(5, generator=torch.Generator().manual_seed(4)).requires_grad_()
    frontend.compile(fn, options=STRICT)(x)
    new_process()
    built.clear()  # (that compile traced: it built the inductor_ir table)
    (grad,) = torch.autograd.grad(frontend.compile(fn, options=STRICT)(x), x, create_graph=True)
    (second,) = torch.autograd.grad(grad.sum(), x)
    (want,) = torch.autograd.grad(torch.autograd.grad(fn(x), x, create_graph=True)[0].sum(), x)
    torch.testing.assert_close(second, want)
    assert sorted(built) == ["inductor_ir table", "table"]  # the double backward's replay built them, once


def test_graphs_run_eagerly_are_not_saved(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import inductor_ir

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no kernels today")

    monkeypatch.setattr(inductor_ir, "compile_graph", fail)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(frontend.compile(_fn)(x, y), _fn(x, y))
    assert _entries(cache_dir) == []


# ---------------------------------------------------------------- what the key covers


def _captured(fn: Callable[..., Any], *args: Any, **compile_args: Any) -> tuple[torch.fx.GraphModule, list[Any]]:
    seen: list[tuple[torch.fx.GraphModule, list[Any]]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        seen.append((gm, list(example_inputs)))
        return gm.forward

    frontend.reset()
    frontend.compile(fn, backend=backend, **compile_args)(*args)
    return seen[0]


def _key(gm: torch.fx.GraphModule, inputs: list[Any], config: frontend.Config | None = None,
         backends: dict[str, Any] | None = None, device: str = "cpu") -> str:
    return graph_key(key_components(gm, inputs, config or frontend.config.snapshot(), backends or {}, device))


def test_every_key_component_changes_the_key() -> None:
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    gm, inputs = _captured(_fn, x, y)
    base = _key(gm, inputs)
    assert base == _key(*_captured(_fn, x.clone(), y.clone())), "the same graph and inputs: the same key"
    changed = {
        "graph": _key(*_captured(lambda a, b: (torch.cos(a) * b + a.exp()).sum(dim=1), x, y)),
        "shape": _key(*_captured(_fn, torch.randn(5, 3), torch.randn(5, 3))),
        "dtype": _key(*_captured(_fn, x.double(), y.double())),
        "strides": _key(*_captured(_fn, torch.randn(3, 4).t(), y)),
        "requires_grad": _key(*_captured(_fn, x.clone().requires_grad_(), y)),
        "symbolic": _key(*_captured(_fn, x, y, dynamic=True)),
        "options": _key(gm, inputs, frontend.config.with_options({"runtime_checks": False})),
        "backend": _key(gm, inputs, backends={"cpu": _FakeBackend()}),
        "device": _key(gm, inputs, device="cuda") if torch.cuda.is_available() else "skipped",
    }
    with torch.no_grad():
        changed["grad mode"] = _key(gm, inputs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        changed["autocast"] = _key(gm, inputs)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        changed["default dtype"] = _key(gm, inputs)
    finally:
        torch.set_default_dtype(default)
    for name, key in changed.items():
        assert key != base, f"a change of {name} must miss"


def test_versions_and_module_settings_change_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import frontend.graph_cache.key as key_module

    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.1))
    x = torch.randn(2, 3)
    gm, inputs = _captured(model, x)
    base = _key(gm, inputs)
    model.eval()
    assert _key(*_captured(model, x)) != base, "train/eval mode"
    model.train()
    model[1].p = 0.2
    assert _key(*_captured(model, x)) != base, "a submodule's settings"
    model[1].p = 0.1
    versions = dict(key_module.versions_part())
    monkeypatch.setattr(key_module, "versions_part", lambda: {**versions, "torch": "0.0.0"})
    assert _key(gm, inputs) != base, "torch's version"


def test_functions_with_nested_code_key_the_same_in_every_process() -> None:
    from frontend.graph_cache.key import _code_text

    def helper(x: torch.Tensor) -> list[torch.Tensor]:
        return [(lambda t: t + i)(x) for i in range(2)]

    assert "0x" not in _code_text(helper.__code__), "no memory addresses (they differ per process)"


class _FakeBackend:
    def hash(self) -> str:
        return "another code generator"


# ---------------------------------------------------------------- faults: compile again, say so once


def _one_entry(cache_dir: Path) -> Path:
    _train_step_matches_eager()
    (entry,) = _entries(cache_dir)[:1]
    new_process()
    return entry


def _recompiles_with_one_warning(match: str) -> None:
    with pytest.warns(RuntimeWarning, match=match) as record:
        _train_step_matches_eager()
        _train_step_matches_eager()
    assert len([w for w in record if "graph cache" in str(w.message)]) == 1
    assert _misses() >= 1


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), id="truncated"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-10] + bytes(10)), id="corrupt"),
        pytest.param(lambda p: p.write_bytes(b"garbage"), id="garbage"),
    ],
)
def test_damaged_entry_is_compiled_again(cache_dir: Path, damage: Callable[[Path], None]) -> None:
    entry = _one_entry(cache_dir)
    damage(entry)
    _recompiles_with_one_warning("unusable")
    assert _entries(cache_dir), "the entry is rewritten"


def test_another_keys_entry_is_never_loaded(cache_dir: Path) -> None:
    _train_step_matches_eager()  # a training graph and an inference graph: two entries
    first, second = _entries(cache_dir)[:2]
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)
    second.write_bytes(a)
    new_process()
    _recompiles_with_one_warning("another key")


def test_unreadable_entry(cache_dir: Path) -> None:
    entry = _one_entry(cache_dir)
    entry.unlink()
    entry.mkdir()  # reading it fails (IsADirectoryError), as a file without permission would
    _train_step_matches_eager()
    assert _misses() >= 1


def test_cache_folder_that_is_a_file(tmp_path: Path, cache_dir: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder")
    with frontend.config.patch(cache_dir=blocked):
        _recompiles_with_one_warning("cannot be used")


def test_read_only_cache_folder(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_replace = os.replace

    def read_only(source: Any, target: Any) -> None:
        if "graphs" in str(target):
            raise OSError(errno.EROFS, "Read-only file system")
        real_replace(source, target)

    monkeypatch.setattr(store.os, "replace", read_only)
    _recompiles_with_one_warning("cannot be used")


def test_missing_cache_folder_is_created(tmp_path: Path, cache_dir: Path) -> None:
    with frontend.config.patch(cache_dir=tmp_path / "not" / "yet"):
        _train_step_matches_eager()
        assert _entries(tmp_path / "not" / "yet")
        new_process()
        _train_step_matches_eager()
        assert _hits() >= 1


def test_damaged_bundle_is_refused(cache_dir: Path) -> None:
    _train_step_matches_eager()
    bundle = frontend.save_cache_artifacts()
    for damaged in (bundle[:-5], bundle[:40], b"nonsense", bundle.replace(b"kiln-graph-cache", b"kiln-graph-cachX", 1)):
        with pytest.raises(InvalidCacheBundleError):
            frontend.load_cache_artifacts(damaged)


# ---------------------------------------------------------------- real processes

_WORKER = textwrap.dedent(
    """
    import copy, json, sys, torch, frontend
    mode, out = sys.argv[1], sys.argv[2]
    if mode == "load-bundle":
        frontend.load_cache_artifacts(open(sys.argv[3], "rb").read())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.GELU(), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 5))
    eager = copy.deepcopy(model)
    x = torch.randn(8, 12, generator=torch.Generator().manual_seed(1))
    cotangent = torch.randn(8, 5, generator=torch.Generator().manual_seed(3))
    compiled = frontend.compile(model, options={"fallback_to_eager": False})
    y, expected = compiled(x), eager(x)
    torch.testing.assert_close(y, expected)
    (y * cotangent).sum().backward()
    (expected * cotangent).sum().backward()
    for got, want in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(got.grad, want.grad)
    torch.save({"y": y.detach(), "grads": [p.grad for p in model.parameters()]}, out + ".pt")
    from frontend.graph_cache.key import versions_part
    json.dump({"cache": frontend.compile_times("cache"), "seconds": frontend.compile_times("dict"),
               "sources": versions_part()["kiln"]}, open(out, "w"))
    if mode == "save-bundle":
        open(sys.argv[3], "wb").write(frontend.save_cache_artifacts())
    """
)


def _start(tmp_path: Path, cache: Path, name: str, *args: str) -> tuple[subprocess.Popen[str], Path]:
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    out = tmp_path / f"{name}.json"
    env = {**os.environ, "KILN_CACHE_DIR": str(cache), "KILN_GRAPH_CACHE": "1", "OMP_NUM_THREADS": "1"}
    mode, rest = (args[0], args[1:]) if args else ("plain", ())
    process = subprocess.Popen([sys.executable, str(script), mode, str(out), *rest],
                               env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return process, out


def _finish(process: subprocess.Popen[str], out: Path) -> dict[str, Any]:
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def _skip_if_sources_changed(cold: dict[str, Any], warm: dict[str, Any]) -> None:
    """Kiln's own files are part of the key: edited between the two processes (a development
    checkout shared with others), the warm one rightly misses."""
    if cold["sources"] != warm["sources"]:
        pytest.skip("Kiln's sources changed between the processes")


def _same_results(first: Path, second: Path) -> None:
    a, b = torch.load(str(first) + ".pt"), torch.load(str(second) + ".pt")
    assert torch.equal(a["y"], b["y"])
    assert all(torch.equal(p, q) for p, q in zip(a["grads"], b["grads"]))


def test_concurrent_processes_then_a_warm_one(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    running = [_start(tmp_path, cache, f"cold{i}") for i in range(3)]
    cold = [_finish(*job) for job in running]
    assert all(r["cache"]["graph"]["misses"] >= 1 for r in cold)
    warm_job = _start(tmp_path, cache, "warm")
    warm = _finish(*warm_job)
    _skip_if_sources_changed(cold[0], warm)
    assert warm["cache"]["graph"] == {"hits": 1, "misses": 0}
    assert warm["seconds"]["aotgrad"] == warm["seconds"]["compile"] == 0.0
    _same_results(tmp_path / "cold0.json", tmp_path / "warm.json")


def test_bundle_into_another_cache_folder(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle.kiln"
    saved = _finish(*_start(tmp_path, tmp_path / "machine_a", "a", "save-bundle", str(bundle)))
    result = _finish(*_start(tmp_path, tmp_path / "machine_b", "b", "load-bundle", str(bundle)))
    _skip_if_sources_changed(saved, result)
    assert result["cache"]["graph"] == {"hits": 1, "misses": 0}
    assert result["cache"]["kernels"]["misses"] == 0, "the libraries came with the bundle: nothing compiled"
    _same_results(tmp_path / "a.json", tmp_path / "b.json")


def _cumprod_under_autocast(index: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.cumprod(x, 0), index.to(torch.float32)


def test_an_entry_specialized_while_compiling_is_not_loaded_for_other_sizes(cache_dir: Path) -> None:
    """fuzz 16b512ee29: compiling the graph for size 3 specialized its symbolic size to 3 (a guard
    added after the key was made); the recompile for size 5 has the same key and loaded that entry,
    whose input check then refused the call. Entries keep the checks compiling added."""
    compiled = frontend.compile(_cumprod_under_autocast, options=STRICT)
    for rows in (2, 2, 3, 5, 6):
        index = torch.randint(0, 5, (1, rows, 1), generator=torch.Generator().manual_seed(rows))
        x = torch.randn(rows, generator=torch.Generator().manual_seed(rows + 1), requires_grad=True)
        got, want = compiled(index, x), _cumprod_under_autocast(index, x)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w)
        torch.testing.assert_close(torch.autograd.grad(got[0].sum(), x), torch.autograd.grad(want[0].sum(), x))
