"""The backends registry: built-ins, register_backend, unknown names, entry-point plugins."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import frontend
from frontend.backends.registry import BackendRegistry, lookup_backend
from frontend.context import CompileContext


def test_builtin_backends_are_listed() -> None:
    names = frontend.list_backends()
    for name in ("eager", "aot_eager", "inductor", "cudagraphs"):
        assert name in names


def test_unknown_backend_is_an_error_listing_known_ones() -> None:
    with pytest.raises(frontend.UnknownBackendError) as info:
        frontend.compile(lambda x: x, backend="inductr")
    message = str(info.value)
    assert "'inductr'" in message
    for name in ("eager", "aot_eager", "inductor", "cudagraphs"):
        assert name in message
    with pytest.raises(frontend.UnknownBackendError):
        frontend.optimize("nope")


def test_register_backend_forms() -> None:
    calls: list[str] = []

    @frontend.register_backend
    def kiln_test_plain(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        calls.append("plain")
        return gm.forward

    @frontend.register_backend(name="kiln_test_named")
    def some_function(gm: torch.fx.GraphModule, example_inputs: list[Any], context: CompileContext) -> Any:
        calls.append(context.label)
        return gm.forward

    assert {"kiln_test_plain", "kiln_test_named"} <= set(frontend.list_backends())
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    context = CompileContext.for_config(frontend.Config(), "label")
    x = torch.randn(3)
    assert torch.equal(lookup_backend("kiln_test_plain")(gm, [x], context)(x), x + 1)
    assert torch.equal(lookup_backend("kiln_test_named")(gm, [x], context)(x), x + 1)
    assert calls == ["plain", "label"]


def test_entry_point_plugins_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed-distribution layout: a module and a dist-info with entry_points.txt.
    (tmp_path / "kiln_fake_plugin.py").write_text(
        "def plugin_backend(gm, example_inputs):\n"
        "    def run(*args):\n"
        "        return [t * 0 + 7 for t in gm(*args)] if isinstance(gm(*args), (list, tuple)) else gm(*args) * 0 + 7\n"
        "    return run\n"
    )
    dist_info = tmp_path / "kiln_fake_plugin-0.1.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: kiln-fake-plugin\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text("[kiln.test_backends]\nsevens = kiln_fake_plugin:plugin_backend\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = BackendRegistry(entry_point_group="kiln.test_backends")
    assert "sevens" in registry.names()
    gm = torch.fx.symbolic_trace(lambda x: x * 2)
    x = torch.randn(4)
    compiled = registry.entry("sevens").compiler(gm, [x], CompileContext.for_config(frontend.Config(), "f"))
    assert torch.equal(compiled(x), torch.full((4,), 7.0))
    monkeypatch.delitem(sys.modules, "kiln_fake_plugin", raising=False)


def test_backend_must_be_name_or_callable() -> None:
    with pytest.raises(frontend.UnknownBackendError, match="callable"):
        lookup_backend(42)  # type: ignore[arg-type]
