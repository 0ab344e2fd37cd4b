"""Existing dicts the region only assigns items to (``ACTIVATIONS["h"] = h``, ``self.cache["last"] = x``) are not
guarded on their keys: the keys they gain on the first call do not recompile the next. Their assignments are
replayed as one ``update``, with eager's key order. ``d[k]``, ``d.get(k)`` and ``k in d`` guard only that key
(present or not, and its value), so keys the region never looks at may come and go; a dict the region uses as a
whole (iteration, ``len``) keeps its key guard."""

from __future__ import annotations

from typing import Any

import torch
from capture_helpers import RecordingBackend

import capture
from capture.events import CaptureHooks, Recompiled


def _inputs(seed: int, n: int = 5) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed))


def _compile(fn: Any) -> tuple[RecordingBackend, list[Recompiled], Any]:
    backend = RecordingBackend()
    recompiles: list[Recompiled] = []
    return backend, recompiles, capture.optimize(backend, hooks=CaptureHooks(on_recompile=[recompiles.append]))(fn)


ACTIVATIONS: dict[str, torch.Tensor] = {}


def record_activation(x: torch.Tensor) -> torch.Tensor:
    h = x.relu()
    ACTIVATIONS["h"] = h
    ACTIVATIONS.update(scaled=h * 3)
    return h * 2


def test_a_global_dict_the_region_only_assigns_to_compiles_once() -> None:
    backend, recompiles, compiled = _compile(record_activation)
    for seed in range(5):
        x = _inputs(seed)
        got = compiled(x)
        recorded = dict(ACTIVATIONS)
        want = record_activation(x)
        torch.testing.assert_close(got, want)
        assert list(recorded) == ["h", "scaled"]
        torch.testing.assert_close(recorded["h"], ACTIVATIONS["h"])
        torch.testing.assert_close(recorded["scaled"], ACTIVATIONS["scaled"])
    assert backend.count == 1
    assert recompiles == []


class KeepsLast(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cache: dict[str, Any] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache["last"] = x.detach()
        self.cache["calls"] = "seen"
        return x * 2


def test_a_module_attribute_dict_the_region_only_assigns_to_compiles_once() -> None:
    module = KeepsLast()
    backend, recompiles, compiled = _compile(module)
    for seed in range(4):
        x = _inputs(seed)
        torch.testing.assert_close(compiled(x), x * 2)
        assert module.cache["last"] is not None
        torch.testing.assert_close(module.cache["last"], x)
        assert module.cache["calls"] == "seen"
    assert backend.count == 1
    assert recompiles == []


def test_assignments_keep_eager_key_order() -> None:
    def fn(x: torch.Tensor, d: dict[str, Any]) -> torch.Tensor:
        d["b"] = x.sum()
        d["z"] = x.max()
        return x + 1

    backend, _recompiles, compiled = _compile(fn)
    for seed in range(3):
        x = _inputs(seed)
        got_dict: dict[str, Any] = {"a": 1, "b": 2}
        want_dict: dict[str, Any] = {"a": 1, "b": 2}
        torch.testing.assert_close(compiled(x, got_dict), fn(x, want_dict))
        assert list(got_dict) == list(want_dict) == ["a", "b", "z"]
        torch.testing.assert_close(got_dict["b"], want_dict["b"])
        torch.testing.assert_close(got_dict["z"], want_dict["z"])
    assert backend.count == 1


CACHE: dict[int, torch.Tensor] = {}


def memoized_offsets(x: torch.Tensor) -> torch.Tensor:
    key = x.shape[-1]
    if key not in CACHE:
        CACHE[key] = torch.arange(key, dtype=x.dtype)
    return x + CACHE[key]


def test_a_dict_the_region_reads_still_recompiles_when_its_keys_change() -> None:
    CACHE.clear()
    backend, recompiles, compiled = _compile(memoized_offsets)
    for seed in range(4):
        x = _inputs(seed)
        torch.testing.assert_close(compiled(x), x + torch.arange(5.0))
    assert backend.count == 2  # without the key, then with it
    CACHE.clear()  # a real change: the key is gone again
    x = _inputs(9)
    torch.testing.assert_close(compiled(x), x + torch.arange(5.0))
    assert "CONTAINS" in recompiles[-1].failed_guard  # `key not in CACHE` reads that one key
    assert CACHE.keys() == {5}


def test_write_only_dicts_passed_twice_stay_correct() -> None:
    def fn(x: torch.Tensor, a: dict[str, Any], b: dict[str, Any]) -> torch.Tensor:
        a["x"] = x.sum()
        b["y"] = x.mean()
        a["z"] = x.max()
        return x * 2

    _backend, _recompiles, compiled = _compile(fn)
    x = _inputs(0)
    compiled(x, {}, {})
    got: dict[str, Any] = {}
    want: dict[str, Any] = {}
    torch.testing.assert_close(compiled(x, got, got), fn(x, want, want))
    assert list(got) == list(want) == ["x", "y", "z"]
    for key in want:
        torch.testing.assert_close(got[key], want[key])


def test_a_dict_made_in_the_call_crossing_a_break_compiles_once() -> None:
    def fn(x: torch.Tensor) -> Any:
        outputs = {}
        for i in range(3):
            outputs[f"layer{i}"] = x * i
        capture.graph_break()
        outputs["total"] = sum(outputs.values())
        return outputs

    backend, recompiles, compiled = _compile(fn)
    for seed in range(4):
        x = _inputs(seed)
        got, want = compiled(x), fn(x)
        assert list(got) == list(want)
        for key in want:
            torch.testing.assert_close(got[key], want[key])
    assert backend.count == 2
    assert recompiles == []


class CachedLayer(torch.nn.Module):
    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index
        self.lin = torch.nn.Linear(5, 5)

    def forward(self, x: torch.Tensor, cache: dict[Any, Any]) -> torch.Tensor:
        past = cache.get(self.index)
        h = self.lin(x)
        if past is not None:
            h = h + past
        cache[self.index] = h.detach()
        return h


class CachedStack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([CachedLayer(i) for i in range(4)])

    def forward(self, x: torch.Tensor, cache: dict[Any, Any]) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, cache)
        return x


def test_a_cache_dict_looked_up_by_key_ignores_keys_it_never_reads() -> None:
    model = CachedStack()
    backend, recompiles, compiled = _compile(model)
    cache: dict[Any, Any] = {}
    eager_cache: dict[Any, Any] = {}
    for step in range(5):
        x = _inputs(step).reshape(1, 5)
        torch.testing.assert_close(compiled(x, cache), model(x, eager_cache))
        assert list(cache) == list(eager_cache)
        cache[f"step{step}"] = step  # other users of the dict add keys on every call
        eager_cache[f"step{step}"] = step
    assert backend.count == 2  # the empty cache, then the filled one
    assert all("CONTAINS" in r.failed_guard for r in recompiles)
    del cache[2], eager_cache[2]  # a key it reads is gone: a real change
    x = _inputs(9).reshape(1, 5)
    torch.testing.assert_close(compiled(x, cache), model(x, eager_cache))


def test_a_key_read_after_another_dict_wrote_it_through_the_same_object() -> None:
    def fn(x: torch.Tensor, a: dict[str, Any], b: dict[str, Any]) -> torch.Tensor:
        a["k"] = x.sum()
        seen = b.get("k")
        return x * 2 if seen is None else x + seen

    _backend, _recompiles, compiled = _compile(fn)
    x = _inputs(1)
    torch.testing.assert_close(compiled(x, {}, {}), fn(x, {}, {}))
    shared: dict[str, Any] = {}
    eager_shared: dict[str, Any] = {}
    torch.testing.assert_close(compiled(x, shared, shared), fn(x, eager_shared, eager_shared))
