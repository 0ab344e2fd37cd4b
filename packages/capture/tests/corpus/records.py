"""@dataclass and namedtuple instances created, read and returned inside the traced region."""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from ._registry import args, program, randn, x, xy

F = "records"

Pair = namedtuple("Pair", ["left", "right"])


class Stats(NamedTuple):
    """A typed namedtuple."""

    mean: torch.Tensor
    std: torch.Tensor


@dataclass
class Config:
    """A mutable dataclass of Python values."""

    scale: float = 2.0
    layers: int = 3
    names: list[str] = field(default_factory=lambda: ["a", "b"])


@dataclass(frozen=True)
class Frozen:
    """A frozen dataclass holding a tensor."""

    weight: torch.Tensor
    bias: float


@dataclass
class Output:
    """A dataclass returned by an inner function."""

    logits: torch.Tensor
    hidden: torch.Tensor


def _encode(t: torch.Tensor) -> Output:
    return Output(logits=t.sum(-1), hidden=t.tanh())


@program(F, xy((4,)))
def namedtuple_fields(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    p = Pair(a, b)
    return p.left * p.right + p[0]


@program(F, x(4, 4))
def typed_namedtuple_returned(a: torch.Tensor) -> Stats:
    return Stats(a.mean(0), a.std(0))


@program(F, xy((4,)))
def namedtuple_unpack(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    left, right = Pair(a.sin(), b.cos())
    return left - right


@program(F, x(4))
def namedtuple_replace(a: torch.Tensor) -> torch.Tensor:
    p = Pair(a, a * 2)._replace(right=a * 3)
    return p.left + p.right


@program(F, x(4))
def namedtuple_asdict(a: torch.Tensor) -> torch.Tensor:
    d = Pair(a, a + 1)._asdict()
    return d["left"] * d["right"]


@program(F, args(lambda: Pair(randn(3), randn(3))))
def namedtuple_input(p: Pair) -> torch.Tensor:
    return p.left @ p.right


@program(F, x(4))
def dataclass_defaults(a: torch.Tensor) -> torch.Tensor:
    cfg = Config()
    for _ in range(cfg.layers):
        a = a * cfg.scale
    return a + len(cfg.names)


@program(F, x(4))
def dataclass_mutation(a: torch.Tensor) -> torch.Tensor:
    cfg = Config(scale=0.5)
    cfg.layers = 2
    return a * cfg.scale * cfg.layers


@program(F, x(4))
def frozen_dataclass(a: torch.Tensor) -> torch.Tensor:
    f = Frozen(weight=a.exp(), bias=1.5)
    return f.weight + f.bias


@program(F, x(2, 3))
def dataclass_returned_by_callee(a: torch.Tensor) -> torch.Tensor:
    out = _encode(a)
    return out.hidden * out.logits.unsqueeze(-1)


@program(F, x(4))
def dataclass_replace(a: torch.Tensor) -> torch.Tensor:
    cfg = dataclasses.replace(Config(), scale=3.0)
    return a * cfg.scale


@program(F, args(lambda: Config(scale=1.5, layers=2), lambda: randn(4)))
def dataclass_input(cfg: Config, a: torch.Tensor) -> torch.Tensor:
    return a * cfg.scale + cfg.layers


@program(F, x(4))
def dataclass_fields_introspection(a: torch.Tensor) -> torch.Tensor:
    names = [f.name for f in dataclasses.fields(Config)]
    return a * len(names)


@program(F, x(3))
def namedtuple_in_list(a: torch.Tensor) -> torch.Tensor:
    pairs = [Pair(a * k, a + k) for k in range(3)]
    return sum(p.left - p.right for p in pairs)
