"""The corpus registry: one `Program` record per small PyTorch program, grouped by feature tag."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Inputs = tuple[Any, ...]


@dataclass(frozen=True)
class Program:
    """One corpus program.

    Attributes:
        name: unique id, `<feature>.<function name>`; the key in reference.json.
        feature: the Python / PyTorch feature it exercises (the grouping of the coverage report).
        build: returns a fresh callable (a function or an `nn.Module`) each time it is called, so that
            eager and compiled runs never share mutable state; the harness seeds torch's RNG before it.
        make_inputs: returns fresh random positional inputs (never zeros).
    """

    name: str
    feature: str
    build: Callable[[], Callable[..., Any]]
    make_inputs: Callable[[], Inputs]


PROGRAMS: dict[str, Program] = {}


def _add(record: Program) -> None:
    if record.name in PROGRAMS:
        raise ValueError(f"corpus program {record.name!r} is registered twice; rename one")
    PROGRAMS[record.name] = record


def program(
    feature: str, make_inputs: Callable[[], Inputs]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a plain function as a corpus program (the function itself is stateless)."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _add(Program(f"{feature}.{fn.__name__}", feature, lambda: fn, make_inputs))
        return fn

    return register


def stateful(
    feature: str, make_inputs: Callable[[], Inputs]
) -> Callable[[Callable[[], Callable[..., Any]]], Callable[[], Callable[..., Any]]]:
    """Register a builder (a function returning a fresh function or module) as a corpus program."""

    def register(build: Callable[[], Callable[..., Any]]) -> Callable[[], Callable[..., Any]]:
        _add(Program(f"{feature}.{build.__name__}", feature, build, make_inputs))
        return build

    return register


def module(
    feature: str, make_inputs: Callable[[], Inputs]
) -> Callable[[type[torch.nn.Module]], type[torch.nn.Module]]:
    """Register an `nn.Module` class (constructed with no arguments; it stays in its default training mode)."""

    def register(cls: type[torch.nn.Module]) -> type[torch.nn.Module]:
        _add(Program(f"{feature}.{cls.__name__}", feature, cls, make_inputs))
        return cls

    return register


def randn(*shape: int) -> torch.Tensor:
    """Standard-normal random tensor."""
    return torch.randn(*shape)


def positive(*shape: int) -> torch.Tensor:
    """Random tensor in [0.5, 1.5): safe for log, sqrt and division."""
    return torch.rand(*shape) + 0.5


def ints(high: int, *shape: int) -> torch.Tensor:
    """Random int64 tensor in [1, high)."""
    return torch.randint(1, high, shape)


def args(*factories: Callable[[], Any]) -> Callable[[], Inputs]:
    """An input factory calling each of `factories` for one positional argument."""
    return lambda: tuple(make() for make in factories)


def x(*shape: int) -> Callable[[], Inputs]:
    """An input factory for one standard-normal tensor argument."""
    return lambda: (torch.randn(*shape),)


def xy(shape: Sequence[int], other: Sequence[int] | None = None) -> Callable[[], Inputs]:
    """An input factory for two standard-normal tensor arguments."""
    return lambda: (torch.randn(*shape), torch.randn(*(other if other is not None else shape)))
