"""Missing guards, searched systematically: every place a value can live, every way code can read it,
every way it can change between two calls.

Each case builds a fresh function reading a value from one *place* (a global, a closure cell, an
attribute of a user module, a class attribute, an instance attribute, a dict or list entry, a default
argument, a functools.partial keyword, a module attribute, a tensor's Python attribute), *uses* it in
one way (arithmetic with a tensor, a branch, a size argument, a call), compiles it, calls it, *changes*
the value (rebinding it, or mutating the container it lives in), and calls again: the compiled result
must equal eager's every time. A case that fails is a guard the compiler does not install.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from capture_helpers import RecordingBackend

import capture

# Values before and after the change, per kind of use.
USES: dict[str, tuple[Any, Any, Callable[[torch.Tensor, Any], torch.Tensor]]] = {
    "scale": (2.0, 5.0, lambda x, v: x * v),
    "branch": (True, False, lambda x, v: x.sin() if v else x.cos()),
    "size": (2, 4, lambda x, v: x.reshape(v, -1).sum(0)),
    "call": (torch.sin, torch.tanh, lambda x, v: v(x)),
    "tensor": (torch.ones(8), torch.full((8,), 3.0), lambda x, v: x + v),
    "string": ("sum", "amax", lambda x, v: getattr(x, v)(0)),
    "none": (None, 1.5, lambda x, v: x if v is None else x * v),
    "signed zero": (0.0, -0.0, lambda x, v: x / v),  # 0.0 == -0.0, but x / -0.0 flips every infinity
}


class Holder:
    """A plain object whose attributes and class attributes hold the values."""


@dataclass
class Case:
    """A function reading a value, and a way to change that value afterwards."""

    fn: Callable[[torch.Tensor], torch.Tensor]
    change: Callable[[], None]


def _global(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    namespace: dict[str, Any] = {"VALUE": before, "use": use}
    exec("def fn(x):\n    return use(x, VALUE)\n", namespace)
    return Case(namespace["fn"], lambda: namespace.__setitem__("VALUE", after))


def _cell(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    value = before

    def fn(x: torch.Tensor) -> torch.Tensor:
        return use(x, value)

    def change() -> None:
        nonlocal value
        value = after

    return Case(fn, change)


def _user_module(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    module = types.ModuleType("kiln_guard_matrix_config")
    module.value = before  # type: ignore[attr-defined]
    namespace: dict[str, Any] = {"config": module, "use": use}
    exec("def fn(x):\n    return use(x, config.value)\n", namespace)
    return Case(namespace["fn"], lambda: setattr(module, "value", after))


def _class_attribute(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    klass = type("Config", (), {"value": staticmethod(before) if callable(before) else before})
    instance = klass()

    def fn(x: torch.Tensor) -> torch.Tensor:
        return use(x, instance.value)

    return Case(fn, lambda: setattr(klass, "value", staticmethod(after) if callable(after) else after))


def _instance_attribute(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    holder = Holder()
    holder.value = before  # type: ignore[attr-defined]

    def fn(x: torch.Tensor) -> torch.Tensor:
        return use(x, holder.value)  # type: ignore[attr-defined]

    return Case(fn, lambda: setattr(holder, "value", after))


def _dict_entry(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    table = {"value": before}

    def fn(x: torch.Tensor) -> torch.Tensor:
        return use(x, table["value"])

    return Case(fn, lambda: table.__setitem__("value", after))


def _list_entry(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    items = [0, before]

    def fn(x: torch.Tensor) -> torch.Tensor:
        return use(x, items[-1])

    return Case(fn, lambda: items.append(after))


def _default_argument(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    def fn(x: torch.Tensor, value: Any = before) -> torch.Tensor:
        return use(x, value)

    return Case(fn, lambda: setattr(fn, "__defaults__", (after,)))


def _partial_keyword(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    inner = functools.partial(lambda x, value: use(x, value), value=before)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return inner(x)

    return Case(fn, lambda: inner.keywords.__setitem__("value", after))


def _nn_module_attribute(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.value = before

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return use(x, self.value)

    model = Model()
    return Case(model, lambda: setattr(model, "value", after))


def _tensor_attribute(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return use(x, getattr(x, "value", before))

    return Case(fn, lambda: None)  # the change: the second call's input carries the attribute


def _nested_attribute(use: Callable[[torch.Tensor, Any], torch.Tensor], before: Any, after: Any) -> Case:
    outer = Holder()
    outer.inner = Holder()  # type: ignore[attr-defined]
    outer.inner.value = before  # type: ignore[attr-defined]

    def fn(x: torch.Tensor) -> torch.Tensor:
        return use(x, outer.inner.value)  # type: ignore[attr-defined]

    return Case(fn, lambda: setattr(outer.inner, "value", after))  # type: ignore[attr-defined]


PLACES: dict[str, Callable[..., Case]] = {
    "global": _global, "cell": _cell, "user_module": _user_module, "class_attribute": _class_attribute,
    "instance_attribute": _instance_attribute, "dict_entry": _dict_entry, "list_entry": _list_entry,
    "default_argument": _default_argument, "partial_keyword": _partial_keyword,
    "nn_module_attribute": _nn_module_attribute, "tensor_attribute": _tensor_attribute,
    "nested_attribute": _nested_attribute,
}


@pytest.mark.parametrize("use", list(USES))
@pytest.mark.parametrize("place", list(PLACES))
def test_a_changed_value_recompiles(place: str, use: str) -> None:
    before, after, reader = USES[use]
    case = PLACES[place](reader, before, after)
    compiled = capture.optimize(RecordingBackend())(case.fn)
    x = torch.randn(8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(compiled(x), case.fn(x))
    case.change()
    second = x.clone()
    if place == "tensor_attribute":
        second.value = after  # type: ignore[attr-defined]
    torch.testing.assert_close(compiled(second), case.fn(second), msg=lambda m: f"{place}/{use} after the change: {m}")
    torch.testing.assert_close(compiled(second), case.fn(second))  # and again, from the cache

