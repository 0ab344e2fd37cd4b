"""One training step of a zoo model, the same for eager, the float64 reference and each compiler.

A step: forward (under the mode's autocast), the loss ``sum_i <leaf_i, P_i>`` over the outputs that
require grad, each `P_i` a fixed random projection (seeded by call and leaf, scaled by
``1/sqrt(numel)``, so every output element gets its own gradient), backward, then what is compared:
the outputs, which outputs require grad, the loss, every parameter's gradient and every buffer
(BatchNorm statistics are updated in place in training mode).

Models train with dropout at zero (config fields and `nn.Dropout` modules), so eager's run is a
function of the inputs alone; `eager_is_random` checks that, and a model that still draws random
numbers trains in eval mode instead. Between steps eager's parameters take a sign-SGD step; every
compiled run starts each call from eager's parameters of that call (`restore`, in place, as an
optimizer writes them), so a compiler that missed an in-place parameter update would read stale
weights and be reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from tools.zoo.compare import flatten
from tools.zoo.modes import Mode

LR = 1e-2
"""Sign-SGD step size: every parameter with a nonzero gradient moves by this much."""

_RANDOM_FIELDS = ("dropout", "layerdrop", "drop_path", "drop_rate", "_prob", "jitter")
"""Config fields (substrings) that make training random: dropout rates, LayerDrop, stochastic
depth, SpecAugment masking probabilities, MoE router jitter."""


def zero_randomness(config: Any) -> None:
    """Set every float field of `config` (and its sub-configs) that draws random numbers in training to 0."""
    seen: set[int] = set()

    def visit(cfg: Any) -> None:
        if id(cfg) in seen:
            return
        seen.add(id(cfg))
        for key, value in list(vars(cfg).items()):
            if hasattr(value, "to_dict") and hasattr(value, "model_type"):
                visit(value)
            elif isinstance(value, float) and value > 0 and any(part in key for part in _RANDOM_FIELDS):
                setattr(cfg, key, 0.0)

    visit(config)


def prepare(model: torch.nn.Module) -> torch.nn.Module:
    """`model` in training mode with every dropout module at p=0."""
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
    return model


def projection(call: int, leaf: int, shape: torch.Size, dtype: torch.dtype) -> torch.Tensor:
    """The fixed random projection of output `leaf` in call `call` (the same for every run)."""
    generator = torch.Generator().manual_seed(10_007 * (call + 1) + leaf)
    numel = max(1, math.prod(shape))
    return (torch.randn(shape, generator=generator, dtype=torch.float64) / math.sqrt(numel)).to(dtype)


def _detach(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, dict):
        return {key: _detach(value[key]) for key in value}
    if isinstance(value, (list, tuple)):
        return [_detach(item) for item in value]
    return value


def train_call(fn: Callable[..., Any], model: torch.nn.Module, kwargs: dict[str, Any], call: int, mode: Mode,
               dtype: torch.dtype = torch.float32) -> dict[str, Any]:
    """Run one training step's forward and backward through `fn` (eager or compiled) on `model`'s parameters.

    `dtype` is the loss's dtype (float64 for the reference run). Returns plain, detached data.
    """
    for parameter in model.parameters():
        parameter.grad = None
    with torch.enable_grad(), mode.autocast_context():
        outputs = fn(**kwargs)
    leaves = [leaf for leaf in flatten(outputs) if isinstance(leaf, torch.Tensor)]
    loss = torch.zeros((), dtype=dtype)
    for index, leaf in enumerate(leaves):
        if leaf.requires_grad and leaf.is_floating_point():
            loss = loss + (leaf.to(dtype) * projection(call, index, leaf.shape, dtype)).sum()
    if loss.requires_grad:
        loss.backward()
    return {
        "outputs": _detach(outputs),
        "requires_grad": [leaf.requires_grad for leaf in leaves],
        "loss": loss.detach(),
        "grads": {name: p.grad for name, p in model.named_parameters()},
        "buffers": {name: b.detach().clone() for name, b in model.named_buffers()},
    }


def step(model: torch.nn.Module) -> None:
    """One sign-SGD step on `model`'s parameters (in place, as an optimizer does)."""
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.grad is not None:
                parameter.add_(parameter.grad.sign(), alpha=-LR)


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of `model`'s parameters and buffers."""
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def restore(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Write `state` into `model`'s parameters and buffers in place (converting dtypes)."""
    with torch.no_grad():
        for key, value in model.state_dict().items():
            value.copy_(state[key])


def eager_is_random(model: torch.nn.Module, kwargs: dict[str, Any], mode: Mode) -> bool:
    """Whether two eager training forwards of the same input under different seeds differ."""
    state = snapshot(model)
    runs = []
    for seed in (1, 2):
        torch.manual_seed(seed)
        restore(model, state)
        runs.append(train_call(model, model, kwargs, 0, mode)["loss"])
    restore(model, state)
    for parameter in model.parameters():
        parameter.grad = None
    return not torch.equal(runs[0], runs[1])
