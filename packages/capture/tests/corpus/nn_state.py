"""nn.Module state and behaviour: buffers, hooks, self.training branches, eval mode, attributes set in forward."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ._registry import module, x

F = "nn_state"


@module(F, x(3, 4))
class BufferRead(nn.Module):
    """Reads a registered buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.randn(4))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a - self.mean


@module(F, x(3, 4))
class BufferMutatedInForward(nn.Module):
    """Updates a running-average buffer in place (as BatchNorm does)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("running", torch.ones(4))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.running.mul_(0.9).add_(a.mean(0) * 0.1)
        return a / self.running


@module(F, x(3, 4))
class NonPersistentBuffer(nn.Module):
    """A non-persistent buffer created from arange."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("positions", torch.arange(4).float(), persistent=False)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a + self.positions


@module(F, x(4, 6))
class TrainingBranch(nn.Module):
    """Branches on self.training (training mode)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        if self.training:
            return self.fc(a) * 2
        return self.fc(a)


@module(F, x(4, 6))
class EvalModeBranch(nn.Module):
    """Branches on self.training after .eval() in the constructor."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.drop = nn.Dropout(0.5)
        self.eval()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        a = self.drop(self.fc(a))
        return a if not self.training else a * 0


@module(F, x(4, 3, 5, 5))
class BatchNormTraining(nn.Module):
    """BatchNorm in training mode: batch statistics and running-stat updates."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(3)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.bn(a).relu()


@module(F, x(4, 3, 5, 5))
class BatchNormEval(nn.Module):
    """BatchNorm in eval mode: running statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(3)
        self.bn.running_mean.uniform_(-1, 1)
        self.bn.running_var.uniform_(0.5, 1.5)
        self.eval()

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.bn(a)


@module(F, x(2, 8))
class ForwardHook(nn.Module):
    """A forward hook registered on a submodule that modifies its output."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.fc.register_forward_hook(lambda mod, inp, out: out * 2)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc(a) + 1


@module(F, x(2, 8))
class ForwardPreHook(nn.Module):
    """A forward pre-hook that rewrites the submodule's input."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.fc.register_forward_pre_hook(lambda mod, inp: (inp[0].tanh(),))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc(a)


@module(F, x(2, 8))
class HookRecordingActivations(nn.Module):
    """A hook that stores activations in a Python dict (a common debugging pattern)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 8)
        self.seen: dict[str, torch.Tensor] = {}
        self.fc1.register_forward_hook(self._record)

    def _record(self, mod: nn.Module, inp: Any, out: torch.Tensor) -> None:
        self.seen["fc1"] = out

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.fc1(a)) + self.seen.get("fc1", a)


@module(F, x(2, 8))
class AttributeSetInForward(nn.Module):
    """Stores a Python value and a tensor on self during forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.last_norm = a.norm()
        return self.fc(a) * self.calls


@module(F, x(2, 8))
class ConfigAttributes(nn.Module):
    """Reads Python config attributes (ints, floats, strings, bools) set in __init__."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = "gelu"
        self.residual = True
        self.scale = 0.5

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        out = self.fc(a)
        out = nn.functional.gelu(out) if self.act == "gelu" else out.relu()
        return out * self.scale + a if self.residual else out


@module(F, x(2, 8))
class WeightAccessDirect(nn.Module):
    """Uses a submodule's weight directly with the functional API."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(a, self.fc.weight * 2, self.fc.bias) + self.fc.weight.sum()


@module(F, x(2, 8))
class TiedWeights(nn.Module):
    """Two modules sharing one Parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(8, 4, bias=False)
        self.dec = nn.Linear(4, 8, bias=False)
        self.dec.weight = nn.Parameter(self.enc.weight.t())

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.dec(self.enc(a).relu())


@module(F, x(2, 8))
class ModuleWithKwargsForward(nn.Module):
    """A forward that takes optional keyword arguments with defaults."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, a: torch.Tensor, mask: torch.Tensor | None = None, scale: float = 1.0) -> torch.Tensor:
        out = self.fc(a) * scale
        if mask is not None:
            out = out * mask
        return out


@module(F, x(2, 8))
class ModuleReturnsDict(nn.Module):
    """Returns a dict of outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, a: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.fc(a)
        return {"hidden": h, "pooled": h.mean(0)}


@module(F, x(2, 8))
class ParameterRequiresGradCheck(nn.Module):
    """Branches on parameter metadata."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.fc.bias.requires_grad_(False)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        if self.fc.bias.requires_grad:
            return self.fc(a)
        return self.fc(a) - self.fc.bias


@module(F, x(4))
class BufferAugmentedAssignment(torch.nn.Module):
    """`self.buffer += x` in training: an in-place update of a buffer through augmented assignment."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4))
        self.register_buffer("steps", torch.zeros(()))
        self.register_buffer("running", torch.zeros(4))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.steps += 1
            self.running *= 0.5
            self.running += a.detach()
        return a * self.weight + self.running / self.steps
