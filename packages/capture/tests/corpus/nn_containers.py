"""nn.Module containers real models use: Sequential, ModuleList, ModuleDict, ParameterList/Dict, nesting."""

from __future__ import annotations

import torch
from torch import nn

from ._registry import module, x

F = "nn_containers"


@module(F, x(2, 8))
class SequentialMLP(nn.Sequential):
    """A Sequential subclass."""

    def __init__(self) -> None:
        super().__init__(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


@module(F, x(2, 8))
class ModuleListLoop(nn.Module):
    """Iterates over a ModuleList."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            a = torch.tanh(layer(a)) + a
        return a


@module(F, x(2, 8))
class ModuleListIndexing(nn.Module):
    """Indexes and slices a ModuleList."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(4)])

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        a = self.layers[0](a)
        for layer in self.layers[1:3]:
            a = layer(a).relu()
        return self.layers[-1](a) * len(self.layers)


@module(F, x(2, 8))
class ModuleDictLookup(nn.Module):
    """Looks up modules by key in a ModuleDict."""

    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.heads["a"](a), self.heads["b"](a)], dim=-1)


@module(F, x(2, 8))
class ModuleDictItems(nn.Module):
    """Iterates over ModuleDict items and checks membership."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleDict({"x": nn.Linear(8, 8), "y": nn.Linear(8, 8)})

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out = a
        for name, block in self.blocks.items():
            out = out + block(a) * len(name)
        if "z" in self.blocks:
            out = out * 100
        return out


@module(F, x(3, 4))
class ParameterListSum(nn.Module):
    """Uses a ParameterList."""

    def __init__(self) -> None:
        super().__init__()
        self.weights = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(3)])

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        for w in self.weights:
            a = a * w
        return a + self.weights[0]


@module(F, x(3, 4))
class ParameterDictLookup(nn.Module):
    """Uses a ParameterDict."""

    def __init__(self) -> None:
        super().__init__()
        self.params = nn.ParameterDict(
            {"scale": nn.Parameter(torch.randn(4)), "shift": nn.Parameter(torch.randn(4))}
        )

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a * self.params["scale"] + self.params["shift"]


class _Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a + self.fc(self.norm(a))


@module(F, x(2, 5, 8))
class NestedSubmodules(nn.Module):
    """Submodules of submodules."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(_Block(8), _Block(8))
        self.out = nn.Linear(8, 2)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(a)).mean(1)


@module(F, x(2, 8))
class NamedChildrenLoop(nn.Module):
    """Iterates over children() and named_modules()."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        for child in self.children():
            t = child(t)
        return t * len(list(self.named_modules()))


@module(F, x(2, 8))
class ParametersIteration(nn.Module):
    """Reduces over self.parameters() inside forward (a regulariser)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        reg = sum(p.pow(2).sum() for p in self.parameters())
        return self.fc(t) + reg


@module(F, x(2, 8))
class SharedModuleTwice(nn.Module):
    """Calls the same submodule twice (weight sharing)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.fc(self.fc(t).relu())


@module(F, x(2, 8))
class GetattrSubmoduleByName(nn.Module):
    """Fetches submodules by computed names (getattr on self)."""

    def __init__(self) -> None:
        super().__init__()
        for i in range(3):
            setattr(self, f"layer{i}", nn.Linear(8, 8))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        for i in range(3):
            t = getattr(self, f"layer{i}")(t)
        return t


@module(F, x(2, 8))
class ModuleWithIdentityAndFlatten(nn.Module):
    """Identity, Flatten and Unflatten modules."""

    def __init__(self) -> None:
        super().__init__()
        self.seq = nn.Sequential(nn.Identity(), nn.Unflatten(1, (2, 4)), nn.Flatten(), nn.Linear(8, 3))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.seq(t)


@module(F, x(2, 8))
class SequentialSliceAndLen(nn.Module):
    """Slices a Sequential and uses len()."""

    def __init__(self) -> None:
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8), nn.Tanh())

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.seq[:2](t) + self.seq[len(self.seq) - 2 :](t)
