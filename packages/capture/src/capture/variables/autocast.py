"""`torch.autocast` regions: traced into the graph as enter/exit nodes, applied to fake propagation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch.amp import autocast_mode

from capture.variables.base import ConstantVariable, Unsupported, VariableTracker

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer

AutocastArgs = tuple[str, torch.dtype, bool, bool]


def make_autocast(args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> AutocastVariable:
    """`torch.autocast(...)` with constant arguments (validated and normalized by torch itself)."""
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise Unsupported("torch.autocast(...) with non-constant arguments")
    try:
        context = torch.autocast(*[a.as_constant() for a in args], **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as error:
        raise Unsupported(f"{type(error).__name__}: {error}", user_error=True) from error
    return AutocastVariable((context.device, context.fast_dtype, bool(context._enabled),
                             bool(context._cache_enabled)))


def existing_autocast(context: torch.autocast) -> AutocastVariable:
    """An autocast object made outside the region (as `@torch.autocast(...)` on a function keeps one)."""
    return AutocastVariable((context.device, context.fast_dtype, bool(context._enabled),
                             bool(context._cache_enabled)))


class AutocastVariable(VariableTracker):
    """An autocast context, not entered yet (BEFORE_WITH enters it)."""

    def __init__(self, values: AutocastArgs) -> None:
        self.values = values

    def python_type(self) -> type:
        return autocast_mode.autocast

    def enter(self, tx: Tracer) -> VariableTracker:
        """Record the enter node and apply the mode to fake propagation; returns the exit callable."""
        node = tx.output.graph.call_function(autocast_mode._enter_autocast, self.values)
        tx.output.autocast_modes.append(self.values)
        return AutocastExitVariable(node, self.values)

    def __repr__(self) -> str:
        return f"AutocastVariable{self.values}"


class AutocastExitVariable(VariableTracker):
    """The `__exit__` of an entered autocast block: records the exit node and pops the mode."""

    def __init__(self, enter_node: Any, values: AutocastArgs) -> None:
        self.enter_node = enter_node
        self.values = values

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        modes = tx.output.autocast_modes
        if not modes or modes[-1] != self.values:
            raise Unsupported("autocast blocks exited out of order")
        modes.pop()
        tx.output.graph.call_function(autocast_mode._exit_autocast, (self.enter_node,))
        return ConstantVariable(None)

    def __repr__(self) -> str:
        return f"AutocastExitVariable{self.values}"


RECURRENT_UNDER_CPU_AUTOCAST = (
    "{} under CPU autocast runs eagerly: eager runs it as one oneDNN kernel, whose result dtype (and "
    "whether it runs at all) depends on the torch version"
)


def cpu_autocast_enabled(tx: Tracer) -> bool:
    """Whether CPU autocast is on at this point of the region: its innermost CPU block, else the
    caller's state."""
    for device, _dtype, enabled, _cache in reversed(tx.output.autocast_modes):
        if device == "cpu":
            return enabled
    return torch.is_autocast_enabled("cpu")
