"""Semantics bytecode tracers get wrong: late binding, mutable defaults, state that changes between calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from ._registry import module, program, stateful, x

F = "tricky"

FLAG = False
SETTINGS = {"scale": 1.0}


@program(F, x(4))
def late_binding_closures(a: torch.Tensor) -> torch.Tensor:
    fns = [lambda t: t * k for k in range(3)]  # late binding: every lambda sees k == 2
    return sum(f(a) for f in fns)


@stateful(F, x(4))
def mutable_default_argument() -> Callable[..., Any]:
    def run(a: torch.Tensor, seen: list[int] = []) -> torch.Tensor:  # noqa: B006 - on purpose
        seen.append(1)
        return a * len(seen)

    return run


@stateful(F, x(4))
def global_flag_toggled_each_call() -> Callable[..., Any]:
    global FLAG
    FLAG = False

    def run(a: torch.Tensor) -> torch.Tensor:
        global FLAG
        FLAG = not FLAG
        return a.sin() if FLAG else a.cos()

    return run


@stateful(F, x(4))
def global_dict_changed_each_call() -> Callable[..., Any]:
    SETTINGS["scale"] = 1.0

    def run(a: torch.Tensor) -> torch.Tensor:
        out = a * SETTINGS["scale"]
        SETTINGS["scale"] *= 3
        return out

    return run


@module(F, x(2, 4))
class AttributeChangedEachCall(nn.Module):
    """A Python attribute read in forward and changed at its end: the next call must see the new value."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = 1.0

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out = self.fc(a) * self.scale
        self.scale += 1.5
        return out


@module(F, x(2, 4))
class TrainingFlippedEachCall(nn.Module):
    """Switches train/eval mode inside forward: the next call takes the other branch."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out = self.bn(a) + (1.0 if self.training else -1.0)
        self.train(not self.training)
        return out


@module(F, x(2, 4))
class SubmoduleSwappedEachCall(nn.Module):
    """Replaces a submodule attribute inside forward."""

    def __init__(self) -> None:
        super().__init__()
        self.act: nn.Module = nn.ReLU()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out = self.act(a)
        self.act = nn.Tanh() if isinstance(self.act, nn.ReLU) else nn.ReLU()
        return out


class Key:
    """A user class with __eq__ and __hash__, used as a dict key."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Key) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


@program(F, x(4))
def user_objects_as_dict_keys(a: torch.Tensor) -> torch.Tensor:
    table = {Key("w"): 2.0, Key("b"): -1.0}
    return a * table[Key("w")] + table[Key("b")]


class Shadow:
    """A class attribute shadowed by an instance attribute."""

    value = 1.0

    def __init__(self) -> None:
        self.value = 5.0


@program(F, x(4))
def instance_shadows_class_attribute(a: torch.Tensor) -> torch.Tensor:
    s = Shadow()
    return a * s.value + Shadow.value


@program(F, x(4))
def tensor_from_python_floats(a: torch.Tensor) -> torch.Tensor:
    weights = [0.1 * k for k in range(4)]
    return a * torch.tensor(weights)


@program(F, x(4))
def large_python_int_constant(a: torch.Tensor) -> torch.Tensor:
    return a * float(2**40) / 2**40 + (10**18 % 7)


def _take_two(gen: Iterator[torch.Tensor]) -> list[torch.Tensor]:
    return [next(gen), next(gen)]


@program(F, x(4))
def generator_partly_consumed(a: torch.Tensor) -> torch.Tensor:
    gen = (a * k for k in range(5))
    first = _take_two(gen)
    rest = list(gen)
    return sum(first) - sum(rest)


@program(F, x(4))
def nonlocal_after_data_dependent_break(a: torch.Tensor) -> torch.Tensor:
    count = 0

    def bump() -> None:
        nonlocal count
        count += 1

    bump()
    if a.sum() > 0:
        bump()
    bump()
    return a * count


@program(F, x(4))
def list_aliasing_in_python(a: torch.Tensor) -> torch.Tensor:
    first = [a]
    second = first
    second.append(a * 2)
    return torch.stack(first).sum(0)


@program(F, x(4))
def rebinding_builtin_name(a: torch.Tensor) -> torch.Tensor:
    sum = torch.sum  # shadows the builtin on purpose
    return sum(a) + a


@program(F, x(4))
def float_vs_int_division(a: torch.Tensor) -> torch.Tensor:
    return a * (7 / 2) + (7 // 2) + (-7 // 2) + (-7 % 3)


@stateful(F, x(4))
def nonlocal_counter_across_calls() -> Callable[..., Any]:
    count = 0

    def run(a: torch.Tensor) -> torch.Tensor:
        nonlocal count
        count += 1
        return a * count

    return run


@stateful(F, x(4))
def function_attribute_counter() -> Callable[..., Any]:
    def run(a: torch.Tensor) -> torch.Tensor:
        run.calls += 1  # type: ignore[attr-defined]
        return a + run.calls  # type: ignore[attr-defined]

    run.calls = 0  # type: ignore[attr-defined]
    return run


class Tally:
    """A class attribute incremented through the class on every call."""

    total = 0

    def __call__(self, a: torch.Tensor) -> torch.Tensor:
        type(self).total += 1
        return a * type(self).total


class SubTally(Tally):
    """Inherits __call__ (and so the callable object's __call__ is not in its own class dict)."""


@stateful(F, x(4))
def class_attribute_counter() -> Callable[..., Any]:
    SubTally.total = 0
    return SubTally()


@module(F, x(2, 4))
class HistoryListOnModule(nn.Module):
    """Appends to a Python list attribute on every call and reads its length."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.history: list[int] = []

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.history.append(a.shape[0])
        return self.fc(a) * len(self.history)


@module(F, x(2, 4))
class CachedPreviousInput(nn.Module):
    """Keeps the previous call's input as a tensor attribute (a KV-cache-like pattern)."""

    def __init__(self) -> None:
        super().__init__()
        self.previous: torch.Tensor | None = None

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out = a if self.previous is None else a + self.previous
        self.previous = a.detach() * 2
        return out


class Greeter:
    """An instance whose method is rebound on the instance."""

    def run(self, a: torch.Tensor) -> torch.Tensor:
        return a + 1


@program(F, x(4))
def method_rebound_on_instance(a: torch.Tensor) -> torch.Tensor:
    g = Greeter()
    before = g.run(a)
    g.run = lambda t: t * 10  # type: ignore[method-assign]
    return before + g.run(a)


@program(F, x(2, 4))
def modules_built_in_the_function(a: torch.Tensor) -> torch.Tensor:
    # A new Linear (new random weights) on every call, and a stateless ReLU: only the ReLU can be traced.
    layer = torch.nn.Linear(4, 4)
    return torch.nn.ReLU()(layer(a)) + torch.nn.Identity()(a)
