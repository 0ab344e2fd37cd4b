"""The model registry: each benchmark model registers a builder beside its definition.

A builder takes a `BuildContext` (device, size profile) and returns a `Workload`: the module, a way to
make fresh random inputs from a seed, and how to run it (autocast, whether inputs need gradients).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

DEVICES: tuple[str, ...] = ("cpu", "cuda")


@dataclass(frozen=True)
class BuildContext:
    """Where a model is built: its device ("cpu" or "cuda"); `large` selects GPU-sized shapes."""

    device: str

    @property
    def large(self) -> bool:
        """True on CUDA: use the GPU-sized shapes."""
        return self.device == "cuda"


@dataclass
class Workload:
    """A built benchmark model and how to feed and run it.

    `make_inputs(generator)` returns fresh positional inputs on the model's device, drawn from
    `generator` (never all zeros). `autocast` is the dtype of the autocast region the model runs in on
    CUDA (None: full precision). `inputs_require_grad` marks float inputs as leaves whose gradients
    the training task checks (for parameter-free microbenchmarks). `source` says where the
    architecture came from (this harness, torchvision, timm or transformers).
    """

    model: torch.nn.Module
    make_inputs: Callable[[torch.Generator], tuple[Any, ...]]
    autocast: torch.dtype | None = None
    inputs_require_grad: bool = False
    source: str = "tools.bench"


Builder = Callable[[BuildContext], Workload]


@dataclass(frozen=True)
class ModelSpec:
    """A registered benchmark model: name, family, devices it runs on, and whether `--quick` includes it."""

    name: str
    family: str
    build: Builder
    devices: tuple[str, ...]
    quick_on: tuple[str, ...]
    description: str


MODELS: dict[str, ModelSpec] = {}


def benchmark_model(
    name: str,
    *,
    family: str,
    devices: tuple[str, ...] = DEVICES,
    quick_on: tuple[str, ...] = (),
    description: str = "",
) -> Callable[[Builder], Builder]:
    """Register a builder under `name` (decorator). Names are unique; `family` groups models in reports."""

    def register(build: Builder) -> Builder:
        if name in MODELS:
            raise ValueError(f"benchmark model {name!r} is registered twice")
        MODELS[name] = ModelSpec(name, family, build, devices, quick_on, description or (build.__doc__ or "").strip())
        return build

    return register


def randn(generator: torch.Generator, *shape: int, device: str, scale: float = 1.0) -> torch.Tensor:
    """Standard normal values drawn on the CPU from `generator` (same values on every device), moved to `device`."""
    return (torch.randn(*shape, generator=generator) * scale).to(device)


def randint(generator: torch.Generator, high: int, *shape: int, device: str) -> torch.Tensor:
    """Uniform integers in [1, high) (so never all zeros), drawn on the CPU from `generator`, moved to `device`."""
    return torch.randint(1, high, shape, generator=generator).to(device)
