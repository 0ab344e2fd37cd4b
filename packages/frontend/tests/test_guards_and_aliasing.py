"""A cached graph is reused only when everything it relied on still holds, and aliased inputs are compiled right.

Each test compiles, changes something the first trace read (how inputs alias, the default dtype, a
tensor's Python attribute, a method on the instance, a submodule's hooks) and compares with eager.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import frontend

BACKENDS = ["aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh(fresh_cache: None) -> None:
    torch.manual_seed(0)


def _write_then_read(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a.add_(1)
    return b * 2


def _run_both(fn: Callable[..., Any], compiled: Callable[..., Any], make: Callable[[], tuple[torch.Tensor, ...]]) -> None:
    """Call eager and compiled on equal fresh inputs; compare results and what the inputs became."""
    torch.manual_seed(1)
    eager_args = make()
    torch.manual_seed(1)
    compiled_args = make()
    expected = fn(*eager_args)
    got = compiled(*compiled_args)
    torch.testing.assert_close(got, expected)
    for after, eager_after in zip(compiled_args, eager_args):
        torch.testing.assert_close(after, eager_after)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_views_of_one_base_see_the_write(backend: str) -> None:
    compiled = frontend.compile(_write_then_read, backend=backend)

    def views() -> tuple[torch.Tensor, torch.Tensor]:
        base = torch.randn(6)
        return base[:4], base[2:]

    with pytest.warns(RuntimeWarning, match="share memory"):
        _run_both(_write_then_read, compiled, views)
    _run_both(_write_then_read, compiled, lambda: (torch.randn(4), torch.randn(4)))  # a new aliasing: recompiles
    _run_both(_write_then_read, compiled, views)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_tensor_twice_after_distinct_tensors(backend: str) -> None:
    compiled = frontend.compile(_write_then_read, backend=backend)
    _run_both(_write_then_read, compiled, lambda: (torch.randn(4), torch.randn(4)))
    twice: Callable[[], tuple[torch.Tensor, torch.Tensor]] = lambda: (torch.randn(4),) * 2  # noqa: E731
    _run_both(_write_then_read, compiled, twice)
    _run_both(_write_then_read, compiled, lambda: (torch.randn(4), torch.randn(4)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_identity_of_tensor_arguments_is_guarded(backend: str) -> None:
    def same_or_not(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a is b:
            return a * 2
        return b * 3

    compiled = frontend.compile(same_or_not, backend=backend)
    x, y = torch.randn(3), torch.randn(3)
    for args in ((x, y), (x, x), (x, y)):
        torch.testing.assert_close(compiled(*args), same_or_not(*args))


@pytest.mark.parametrize("backend", BACKENDS)
def test_reading_inputs_that_share_memory_compiles_without_a_warning(backend: str) -> None:
    def read_only(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * 2 + b

    compiled = frontend.compile(read_only, backend=backend)
    base = torch.randn(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        torch.testing.assert_close(compiled(base[:4], base[2:]), read_only(base[:4], base[2:]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_dtype_change_recompiles(backend: str) -> None:
    def make_ones(x: torch.Tensor) -> torch.Tensor:
        return torch.ones(3) + x * torch.tensor([0.5, 1.5, 2.5])

    compiled = frontend.compile(make_ones, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), make_ones(x))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got, expected = compiled(x), make_ones(x)
    finally:
        torch.set_default_dtype(previous)
    assert got.dtype == expected.dtype == torch.float64
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_attribute_of_a_tensor_is_read_and_guarded(backend: str) -> None:
    def scaled(x: torch.Tensor) -> torch.Tensor:
        return x * getattr(x, "scale", 1.0) + hasattr(x, "shift")

    compiled = frontend.compile(scaled, backend=backend)
    for scale in (3.0, 5.0, None):
        x = torch.randn(3)
        if scale is not None:
            x.scale = scale  # type: ignore[attr-defined]
        torch.testing.assert_close(compiled(x), scaled(x))
    x = torch.randn(3)
    x.shift = True  # type: ignore[attr-defined]
    torch.testing.assert_close(compiled(x), scaled(x))


class _Helper:
    def helper(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1

    def run(self, x: torch.Tensor) -> torch.Tensor:
        return self.helper(x) * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_set_on_the_instance_later_is_called(backend: str) -> None:
    obj = _Helper()
    compiled = frontend.compile(obj.run, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), obj.run(x))
    obj.helper = lambda x: x - 100  # type: ignore[method-assign]
    torch.testing.assert_close(compiled(x), obj.run(x))
    del obj.helper
    _Helper.helper = lambda self, x: x * 7  # type: ignore[method-assign]
    try:
        torch.testing.assert_close(compiled(x), obj.run(x))
    finally:
        _Helper.helper = lambda self, x: x + 1  # type: ignore[method-assign]


class _WithChild(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.lin(x).relu())


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_added_to_a_submodule_after_compiling_run(backend: str) -> None:
    model = _WithChild()
    compiled = frontend.compile(model, backend=backend)
    x = torch.randn(2, 4)

    def same() -> None:
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x))

    same()
    handle = model.lin.register_forward_hook(lambda module, args, output: output * 10)
    same()
    handle.remove()
    same()
    handle = model.norm.register_forward_pre_hook(lambda module, args: (args[0] * 3,))
    same()
    handle.remove()
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, output: output + 1 if type(module) is torch.nn.Linear else None)
    try:
        same()
    finally:
        handle.remove()
    same()


def _expanded(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    doubled = a * 2
    return doubled.expand(3, *doubled.shape), (a > 0)[:, None].expand(2, 4, 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_output_expanded_from_an_intermediate_shares_its_rows(backend: str) -> None:
    """fuzz eda9b7eac8: an output eager returns expanded (stride 0) came back as a dense copy, so a
    write into one row missed the others and an in-place op on it ran where eager raises."""
    compiled = frontend.compile(_expanded, backend=backend, options={"fallback_to_eager": False})
    a = torch.randn(4)
    for got, want in zip(compiled(a), _expanded(a), strict=True):
        assert got.stride() == want.stride() and torch.equal(got, want)
    got, want = compiled(a)[0], _expanded(a)[0]
    got[1].fill_(5.0), want[1].fill_(5.0)
    assert torch.equal(got, want)
    with pytest.raises(RuntimeError, match="more than one element"):
        compiled(a)[1].pow_(False)
