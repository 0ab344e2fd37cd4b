"""Context managers and grad-mode decorators: contextlib.suppress / nullcontext, torch.inference_mode,
`@torch.no_grad()` / `@torch.enable_grad()` / `@torch.inference_mode()` on called functions and methods."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from ._registry import args, module, program, x

F = "contexts"


def _requires_grad(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=True)


@program(F, x(4))
def suppress_key_error_from_dict(a: torch.Tensor) -> torch.Tensor:
    config = {"scale": 2.0}
    out = a
    with contextlib.suppress(KeyError):
        out = out * config["scale"]
        out = out + config["shift"]
    return out.exp()


@program(F, x(4))
def suppress_nothing_raised(a: torch.Tensor) -> torch.Tensor:
    with contextlib.suppress(ValueError, IndexError):
        a = a.sin() * 3
    return a + 1


@program(F, x(4))
def suppress_tuple_of_classes(a: torch.Tensor) -> torch.Tensor:
    sizes = [1, 2]
    with contextlib.suppress(LookupError):
        a = a * sizes[5]
    return a.cos()


@program(F, x(4))
def suppress_raise_inside(a: torch.Tensor) -> torch.Tensor:
    out = a * 2
    with contextlib.suppress(RuntimeError):
        raise RuntimeError("skip the rest of the block")
    return out + 1


@program(F, x(4))
def nullcontext_with_value(a: torch.Tensor) -> torch.Tensor:
    with contextlib.nullcontext(3.0) as scale:
        return a * scale


@program(F, x(4))
def optional_context_pattern(a: torch.Tensor) -> torch.Tensor:
    use_no_grad = True
    with torch.no_grad() if use_no_grad else contextlib.nullcontext():
        b = a * 2
    return b + 1


@program(F, args(lambda: _requires_grad(4)))
def inference_mode_then_clone(a: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        stats = (a * a).mean()
    return a * stats.clone()


@program(F, args(lambda: _requires_grad(4)))
def inference_mode_disabled(a: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode(False):
        b = a.exp()
    return b * 2


@program(F, args(lambda: _requires_grad(4)))
def inference_mode_is_grad_enabled(a: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        inside = torch.is_grad_enabled()
    return a * (2.0 if inside else 3.0)


@torch.no_grad()
def _target_statistics(t: torch.Tensor) -> torch.Tensor:
    return t.mean() + t.std()


@torch.enable_grad()
def _with_grad(t: torch.Tensor) -> torch.Tensor:
    return t * t


@torch.inference_mode()
def _inference_helper(t: torch.Tensor) -> torch.Tensor:
    return t.relu() + 1


@program(F, args(lambda: _requires_grad(6)))
def no_grad_decorated_statistics(a: torch.Tensor) -> torch.Tensor:
    return (a - _target_statistics(a)) * 2


@program(F, args(lambda: _requires_grad(4)))
def enable_grad_decorated_inside_no_grad(a: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        b = _with_grad(a)
    return b + a


@program(F, args(lambda: _requires_grad(4)))
def inference_mode_decorated_helper(a: torch.Tensor) -> torch.Tensor:
    return a * _inference_helper(a).clone()


@program(F, args(lambda: _requires_grad(4)))
def no_grad_decorator_with_kwargs(a: torch.Tensor) -> torch.Tensor:
    @torch.no_grad()
    def shifted(t: torch.Tensor, *, shift: float) -> torch.Tensor:
        return t + shift

    return a * shifted(a, shift=1.5)


@module(F, args(lambda: torch.randn(3, 4)))
class EmaTargetUpdate(nn.Module):
    """A method decorated with @torch.no_grad() that reads a target network, as in EMA/BYOL training."""

    def __init__(self) -> None:
        super().__init__()
        self.online = nn.Linear(4, 4)
        self.target = nn.Linear(4, 4)

    @torch.no_grad()
    def target_features(self, a: torch.Tensor) -> torch.Tensor:
        return self.target(a).softmax(-1)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return (self.online(a) - self.target_features(a)).pow(2).mean()


@module(F, args(lambda: torch.randn(3, 4)))
class InferenceModeEvalHead(nn.Module):
    """A head evaluated in inference mode beside a trained branch."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        feats = self.body(a)
        with torch.inference_mode():
            probe = self.head(a).argmax(-1)
        return feats * probe.clone().unsqueeze(-1).float()


@program(F, x(4, 4))
def profiler_record_function_block(a: torch.Tensor) -> torch.Tensor:
    b = a @ a
    with torch.profiler.record_function("attention"):
        c = b.softmax(-1)
    return c * 2


@module(F, args(lambda: torch.randn(2, 4)))
class ProfiledSubmodules(nn.Module):
    """Profiler labels around submodule calls, as training code often has."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.second = nn.Linear(4, 2)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        with torch.autograd.profiler.record_function("first"):
            a = self.first(a).relu()
        with torch.autograd.profiler.record_function("second"):
            return self.second(a)


@program(F, args(lambda: _requires_grad(4)))
@torch.inference_mode()
def whole_function_in_inference_mode(a: torch.Tensor) -> torch.Tensor:
    return (a * 2).softmax(0) + 1


@program(F, args(lambda: _requires_grad(4)))
@torch.no_grad()
def whole_function_under_no_grad(a: torch.Tensor) -> torch.Tensor:
    return a.exp() / a.exp().sum()


@module(F, args(lambda: torch.randn(3, 4)))
class NoGradForward(nn.Module):
    """An inference module whose forward is decorated with @torch.no_grad()."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    @torch.no_grad()
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.fc(a).argmax(-1).float() + self.fc.bias.sum()


@program(F, lambda: (torch.randn(8, 8), torch.randn(8, 8)))
@torch.autocast("cpu", dtype=torch.bfloat16)
def whole_function_under_autocast(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a @ b).float().relu()


@module(F, args(lambda: torch.randn(2, 8)))
class AutocastContextAttribute(nn.Module):
    """An autocast object kept as an attribute and entered in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.mixed = torch.autocast("cpu", dtype=torch.bfloat16)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        with self.mixed:
            b = self.fc(a)
        return b.float() * 2
