"""Per-call dispatch: reading module state and finding the compiled region cheaply.

`AotCallable` runs on every call of a compiled graph, so its bookkeeping is on the hot path.
`StateReader` reads the module's parameters and buffers through (owner dict, name) slots
resolved once, instead of walking the module tree. `DispatchCache` remembers, per grad mode, the
region the last call used and what its inputs looked like: module state by identity (plus
``requires_grad`` and the data pointer, so ``p.requires_grad_(False)``, ``p.data = ...`` and
``module.half()`` are noticed) and the other inputs by their full signature. Anything it cannot
vouch for goes back to the slow path, which computes the full region key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["DispatchCache", "StateReader"]

Signature = Callable[[int, Any], Any]


def _slot(module: torch.nn.Module, name: str, kind: str) -> tuple[dict[str, Any], str]:
    prefix, _, leaf = name.rpartition(".")
    owner = module.get_submodule(prefix) if prefix else module
    return (owner._parameters if kind == "parameter" else owner._buffers), leaf


class StateReader:
    """Reads ``module``'s parameters then buffers (the order of ``named_parameters()`` and
    ``named_buffers()`` when it was built) on each call, through slots resolved once.

    A parameter the user replaces (``module.lin.weight = nn.Parameter(...)``) is read afresh from
    its owner; one deleted or moved elsewhere makes `read` walk the module as before.
    """

    def __init__(self, module: torch.nn.Module | None) -> None:
        self._module = module
        self.names: list[str] = []
        self._slots: list[tuple[dict[str, Any], str]] = []
        if module is None:
            return
        for name, _ in module.named_parameters():
            self.names.append(name)
            self._slots.append(_slot(module, name, "parameter"))
        for name, _ in module.named_buffers():
            self.names.append(name)
            self._slots.append(_slot(module, name, "buffer"))

    def read(self) -> list[torch.Tensor]:
        """The current state tensors (parameters, then buffers)."""
        try:
            return [owner[name] for owner, name in self._slots]
        except KeyError:
            if self._module is None:
                return []
            return [*self._module.parameters(), *self._module.buffers()]


@dataclasses.dataclass
class _Entry:
    """What the inputs of the last call that used `region` looked like."""

    region: Any
    state: tuple[Any, ...]  # the state tensors themselves (identity)
    state_checks: tuple[tuple[bool, int], ...]  # (requires_grad, data_ptr) per state tensor
    signatures: tuple[Any, ...]  # per other input: its signature
    requires_grad: tuple[bool, ...]  # per other input


def _state_check(value: Any) -> tuple[bool, int]:
    if isinstance(value, torch.Tensor):
        return value.requires_grad, value.data_ptr()
    return False, id(value)


class DispatchCache:
    """Remembers the region of the last call per grad mode, with a cheap check of the inputs.

    Args:
        num_state: how many leading flat inputs are module state (checked by identity).
        signature: ``(position, value) -> signature`` of the other inputs (what the full region
            key holds for them).
    """

    def __init__(self, num_state: int, signature: Signature) -> None:
        self._num_state = num_state
        self._signature = signature
        self._entries: dict[bool, _Entry] = {}

    def lookup(self, flat_inputs: Sequence[Any]) -> _Entry | None:
        """The entry (``.region``) whose inputs these match, or None when the slow path must decide."""
        entry = self._entries.get(torch.is_grad_enabled())
        if entry is None:
            return None
        count = self._num_state
        if len(flat_inputs) - count != len(entry.signatures):
            return None
        try:
            for value, known, check in zip(flat_inputs, entry.state, entry.state_checks):
                if value is not known or _state_check(value) != check:
                    return None
            signature = self._signature
            for position in range(count, len(flat_inputs)):
                value = flat_inputs[position]
                slot = position - count
                if isinstance(value, torch.Tensor) and value.requires_grad != entry.requires_grad[slot]:
                    return None
                if signature(position, value) != entry.signatures[slot]:
                    return None
        except (RuntimeError, TypeError, ValueError):  # a tensor without storage, say
            return None
        return entry

    def remember(self, flat_inputs: Sequence[Any], region: Any) -> None:
        """Record that these inputs use `region` (after the slow path found it)."""
        count = self._num_state
        try:
            state = tuple(flat_inputs[:count])
            checks = tuple(_state_check(value) for value in state)
            others = range(count, len(flat_inputs))
            signatures = tuple(self._signature(position, flat_inputs[position]) for position in others)
        except (RuntimeError, TypeError, ValueError):
            return
        grads = tuple(isinstance(flat_inputs[p], torch.Tensor) and flat_inputs[p].requires_grad for p in others)
        self._entries[torch.is_grad_enabled()] = _Entry(region, state, checks, signatures, grads)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()
