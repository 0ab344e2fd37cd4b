"""The fast guard function: module-tree checks, shared sub-paths, and that it is exactly as strict.

Every change a cached graph relied on must still recompile (or give eager's result): replacing a
parameter, buffer or submodule, requires_grad, `.training`, a guarded Python attribute, `.to(dtype)`,
and the input's shape/dtype/stride. The fast check must agree with checking every guard on its own.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend

import capture
from capture.cache import DEFAULT_CACHE, bind_frame_arguments
from capture.guards import compile_guards, compile_guards_plainly


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.scale = 1.5
        self.register_buffer("shift", torch.randn(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            x = x * 2
        return self.norm(self.lin(x)) * self.scale + self.shift + self.lin.weight.sum()


class Deep(torch.nn.Module):
    def __init__(self, depth: int = 6) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(Block() for _ in range(depth))
        self.head = torch.nn.Parameter(torch.randn(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x * self.head


def _fresh() -> tuple[Deep, Any, RecordingBackend]:
    capture.reset()
    torch.manual_seed(0)
    model = Deep().eval()
    backend = RecordingBackend()
    return model, capture.optimize(backend)(model), backend


def _same(model: torch.nn.Module, compiled: Any, x: torch.Tensor) -> None:
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))


def _replace_param(m: Deep) -> None:
    m.layers[3].lin.weight = torch.nn.Parameter(torch.randn(8, 8))


def _replace_buffer(m: Deep) -> None:
    m.layers[2].shift = torch.randn(8)


def _replace_submodule(m: Deep) -> None:
    m.layers[4].norm = torch.nn.LayerNorm(8, elementwise_affine=False)


def _replace_list_item(m: Deep) -> None:
    m.layers[1] = Block()


def _delete_list_item(m: Deep) -> None:
    del m.layers[2]  # ModuleList rebuilds its `_modules` dict


def _delete_then_append(m: Deep) -> None:
    del m.layers[2]  # a new `_modules` dict, of the same length once a layer is appended
    m.layers.append(Block())


def _rebuild_modules_dict(m: Deep) -> None:
    # A new `_modules` dict (the old one left untouched) holding a new layer 2.
    m.layers._modules = {k: Block() if k == "2" else v for k, v in m.layers._modules.items()}


def _append_list_item(m: Deep) -> None:
    m.layers.append(Block())


def _requires_grad(m: Deep) -> None:
    m.layers[5].lin.bias.requires_grad_(False)


def _training(m: Deep) -> None:
    m.layers[0].train()


def _python_attribute(m: Deep) -> None:
    m.layers[2].scale = 2.0


def _top_parameter(m: Deep) -> None:
    m.head = torch.nn.Parameter(torch.randn(8))


def _to_double(m: Deep) -> None:
    m.layers[3].double()


def _forward_hook(m: Deep) -> None:
    m.layers[3].lin.register_forward_hook(lambda module, args, output: output * 2)


def _forward_pre_hook(m: Deep) -> None:
    m.layers[4].norm.register_forward_pre_hook(lambda module, args: (args[0] + 1,))


def _instance_forward(m: Deep) -> None:
    m.layers[1].lin.forward = lambda x: x * 0.5  # what `module(x)` calls from now on


CHANGES: dict[str, Callable[[Deep], None]] = {
    "replace_param": _replace_param, "replace_buffer": _replace_buffer, "replace_submodule": _replace_submodule,
    "replace_list_item": _replace_list_item, "delete_list_item": _delete_list_item,
    "append_list_item": _append_list_item, "delete_then_append": _delete_then_append,
    "rebuild_modules_dict": _rebuild_modules_dict, "requires_grad": _requires_grad, "training": _training,
    "python_attribute": _python_attribute, "top_parameter": _top_parameter, "to_double": _to_double,
    "forward_hook": _forward_hook, "forward_pre_hook": _forward_pre_hook, "instance_forward": _instance_forward,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_module_change_recompiles(change: str) -> None:
    model, compiled, backend = _fresh()
    x = torch.randn(4, 8)
    _same(model, compiled, x)
    _same(model, compiled, torch.randn(4, 8))
    assert backend.count == 1  # cached: the fast check passes on an unchanged model
    CHANGES[change](model)
    if change == "to_double":
        with pytest.raises(RuntimeError):  # eager raises on the mixed dtypes: so must we
            with torch.no_grad():
                compiled(x)
        return
    _same(model, compiled, x)
    assert backend.count == 2, f"{change} did not recompile"


def test_hook_registered_elsewhere_keeps_the_cache() -> None:
    model, compiled, backend = _fresh()
    x = torch.randn(4, 8)
    _same(model, compiled, x)
    handle = torch.randn(3, requires_grad=True).register_hook(lambda grad: grad)  # a new hook id, no module hook
    _same(model, compiled, x)
    handle.remove()
    assert backend.count == 1
    model.layers[2].norm.register_forward_hook(lambda module, args, output: output - 1)
    _same(model, compiled, x)
    assert backend.count == 2


@pytest.mark.parametrize("make_input", [
    lambda: torch.randn(5, 8), lambda: torch.randn(4, 8, dtype=torch.float64),
    lambda: torch.randn(8, 4).t(), lambda: torch.randn(4, 8).requires_grad_(),
], ids=["shape", "dtype", "stride", "requires_grad"])
def test_input_change_recompiles(make_input: Callable[[], torch.Tensor]) -> None:
    model, compiled, backend = _fresh()
    _same(model, compiled, torch.randn(4, 8))
    x = make_input()
    if x.dtype == torch.float64:
        model.double()
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    assert backend.count == 2


def _entry_and_frame(model: torch.nn.Module, x: torch.Tensor) -> tuple[Any, list[Any], Any, Any]:
    (entry,) = [e for state in DEFAULT_CACHE.states.values() for e in state.entries]
    fn = type(model).forward
    L = bind_frame_arguments(fn, (model, x), {})
    return entry, L, fn.__globals__, fn.__closure__


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_fast_check_agrees_with_every_guard(change: str) -> None:
    model, compiled, _ = _fresh()
    x = torch.randn(4, 8)
    _same(model, compiled, x)
    entry, L, G, C = _entry_and_frame(model, x)
    fast, plain = compile_guards(entry.guard_set), compile_guards_plainly(entry.guard_set)
    with torch.no_grad():
        assert fast(L, G, C) and plain(L, G, C)
        CHANGES[change](model)
        assert fast(L, G, C) == plain(L, G, C) is False


def test_guard_function_walks_no_module_paths() -> None:
    model, compiled, _ = _fresh()
    x = torch.randn(4, 8)
    _same(model, compiled, x)
    entry, *_ = _entry_and_frame(model, x)
    source = entry.check.__kiln_source__
    # Submodules, parameters and buffers are proven by one batched check, never by attribute chains.
    assert ".layers" not in source and ".lin" not in source and "[3]" not in source
    # A handful of batched lines, whatever the depth: training flags, one per registration-dict kind,
    # requires_grad, dtype, is_cpu, attribute values and their types.
    assert source.count("list(map(") <= 10


def test_fast_check_is_much_faster_than_guard_by_guard() -> None:
    model, compiled, _ = _fresh()
    x = torch.randn(4, 8)
    _same(model, compiled, x)
    entry, L, G, C = _entry_and_frame(model, x)
    fast, plain = compile_guards(entry.guard_set), compile_guards_plainly(entry.guard_set)

    def best(check: Callable[..., bool]) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(200):
                check(L, G, C)
            times.append(time.perf_counter() - start)
        return min(times)

    with torch.no_grad():
        assert best(fast) * 3 < best(plain)


def test_internal_error_becomes_a_graph_break_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    from capture.variables import tensor as tensor_variables

    original = tensor_variables.TensorVariable.getattr

    def broken(self: Any, tx: Any, name: str) -> Any:
        if name == "mT":
            raise KeyError("a bug in capture")
        return original(self, tx, name)

    monkeypatch.setattr(tensor_variables.TensorVariable, "getattr", broken)

    def program(a: torch.Tensor) -> torch.Tensor:
        b = a.sin() * 2
        return b.mT.cos()

    capture.reset()
    a = torch.randn(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = capture.optimize("eager")(program)(a)
    torch.testing.assert_close(out, program(a))
    messages = [str(w.message) for w in caught]
    assert any("internal error" in m and "return b.mT.cos()" in m and "test_guard_speed.py" in m
               for m in messages), messages


@pytest.mark.parametrize("dynamic", [None, True])
def test_torch_size_values(dynamic: bool | None) -> None:
    def program(a: torch.Tensor) -> tuple[torch.Tensor, bool, bool, int]:
        s = a.shape
        tail = s[1:]
        grown = (1,) + s
        out = a.reshape(s.numel()).view(s) + a.new_zeros(tail) + a.reshape(grown)[0]
        return out, isinstance(tail, torch.Size), isinstance(grown, torch.Size), tail.numel()

    capture.reset()
    compiled = capture.optimize("eager", dynamic=dynamic)(program)
    for shape in [(2, 3, 4), (3, 5, 4), (4, 6, 2)]:
        a = torch.randn(*shape)
        got, want = compiled(a), program(a)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]


def test_grad_mode_is_checked_first_and_alternating_modes_reuse_their_entries() -> None:
    model, compiled, backend = _fresh()
    model.train()
    for step in range(4):
        x = torch.randn(4, 8)
        if step % 2:
            with torch.no_grad():
                out = compiled(x)
            assert not out.requires_grad
        else:
            out = compiled(x)
            assert out.requires_grad
        with torch.set_grad_enabled(not step % 2):
            torch.testing.assert_close(out, model(x))
    assert backend.count == 2  # one entry per grad mode, each reused
    (state,) = [s for s in DEFAULT_CACHE.states.values() if s.entries]
    for entry in state.entries:
        # The cheapest guard, and the one that tells the two entries apart, comes first: a training
        # step skips the inference entry after one check instead of walking its module tree.
        source = entry.check.__kiln_source__
        first_check = next(line for line in source.splitlines() if line.strip().startswith("if "))
        grad_guard = next(g for g in entry.guard_set.guards if g.kind == "GRAD_MODE")
        assert grad_guard.code in first_check


def test_autocast_state_change_recompiles() -> None:
    def matmul_relu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ w)

    capture.reset()
    backend = RecordingBackend()
    compiled = capture.optimize(backend)(matmul_relu)
    for autocast in (False, True, False, True):
        x, w = torch.randn(4, 4), torch.randn(4, 4)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            ours, eager = compiled(x, w), matmul_relu(x, w)
        assert ours.dtype == eager.dtype == (torch.bfloat16 if autocast else torch.float32)
        torch.testing.assert_close(ours, eager)
    assert backend.count == 2  # one graph outside autocast, one inside; each reused
