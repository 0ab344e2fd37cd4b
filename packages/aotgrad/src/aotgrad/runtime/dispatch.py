"""Per-call dispatch: reading module state and finding the compiled region cheaply.

`AotCallable` runs on every call of a compiled graph, so its bookkeeping is on the hot path.
`StateReader` reads the module's parameters and buffers through (owner dict, name) slots
resolved once, instead of walking the module tree. `DispatchCache` remembers, per grad mode, the
region the last call used and a check generated for what its inputs looked like: module state by
identity (plus ``requires_grad`` and the data pointer, so ``p.requires_grad_(False)``,
``p.data = ...`` and ``module.half()`` are noticed; these are compared for all state tensors at
once, at C speed) and each other input by its type, requires_grad, dtype, shape, strides and
device (or, for inputs with symbolic sizes and non-tensors, by their full signature). Anything
the check cannot vouch for goes back to the slow path, which computes the full region key.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

__all__ = ["DispatchCache", "StateReader"]

Signature = Callable[[int, Any], Any]
Matcher = Callable[[Sequence[Any]], bool]


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
        self._owners: list[dict[str, Any]] = []
        self._keys: list[str] = []
        if module is None:
            return
        slots = [(name, _slot(module, name, "parameter")) for name, _ in module.named_parameters()]
        slots += [(name, _slot(module, name, "buffer")) for name, _ in module.named_buffers()]
        for name, (owner, key) in slots:
            self.names.append(name)
            self._owners.append(owner)
            self._keys.append(key)

    def read(self) -> list[torch.Tensor]:
        """The current state tensors (parameters, then buffers)."""
        try:
            # One C-level loop over the (owner dict, key) slots.
            return list(map(dict.__getitem__, self._owners, self._keys))
        except KeyError:
            if self._module is None:
                return []
            return [*self._module.parameters(), *self._module.buffers()]


@dataclasses.dataclass
class _Entry:
    """A region a recent call used, and the generated check that later inputs look the same."""

    region: Any
    matches: Matcher
    state: tuple[Any, ...]  # the module state it was made for (its check holds these objects)


class DispatchCache:
    """Remembers the regions of the last few calls per grad mode, each with a cheap check of the inputs.

    Several are kept (most recent first, at most `max_entries` per grad mode) so that calls
    alternating between input shapes (a last, smaller batch; two sequence lengths) each find
    theirs, instead of missing and generating a check on every call. Entries made for other state
    tensors (a parameter since replaced) are dropped, so they keep no old tensor alive.

    Args:
        num_state: how many leading flat inputs are module state (checked by identity).
        signature: ``(position, value) -> signature`` of the other inputs (what the full region
            key holds for them, without requires_grad).
        max_entries: how many entries to keep per grad mode.
    """

    def __init__(self, num_state: int, signature: Signature, max_entries: int = 8) -> None:
        self._num_state = num_state
        self._signature = signature
        self._max_entries = max_entries
        self._entries: dict[bool, list[_Entry]] = {False: [], True: []}

    def lookup(self, flat_inputs: Sequence[Any]) -> _Entry | None:
        """The entry (``.region``) whose inputs these match, or None when the slow path must decide."""
        for entry in self._entries[torch.is_grad_enabled()]:
            if entry.matches(flat_inputs):
                return entry
        return None

    def remember(self, flat_inputs: Sequence[Any], region: Any, dynamic_positions: frozenset[int] = frozenset()) -> None:
        """Record that these inputs use `region` (after the slow path found it).

        `dynamic_positions`: inputs compiled with symbolic sizes; they are checked through
        `signature` (which leaves those sizes free), never by their exact shape.
        """
        try:
            matches = _compile_matcher(flat_inputs, self._num_state, self._signature, dynamic_positions)
        except (RuntimeError, TypeError, ValueError):  # a tensor without storage, say: no fast path
            return
        state = tuple(flat_inputs[: self._num_state])
        entries = [
            entry for entry in self._entries[torch.is_grad_enabled()]
            if len(entry.state) == len(state) and all(map(operator.is_, entry.state, state))
        ]
        entries.insert(0, _Entry(region, matches, state))
        self._entries[torch.is_grad_enabled()] = entries[: self._max_entries]

    def clear(self) -> None:
        """Forget every entry."""
        for entries in self._entries.values():
            entries.clear()


_REQUIRES_GRAD = operator.attrgetter("requires_grad")


def _compile_matcher(
    flat_inputs: Sequence[Any], num_state: int, signature: Signature, dynamic_positions: frozenset[int]
) -> Matcher:
    """A generated ``matches(flat) -> bool``: True only when `flat` looks like `flat_inputs`.

    State tensors are compared by identity, then their requires_grad flags and data pointers in
    one C-level ``map`` each; every other input is unrolled into one expression. Any exception
    (a tensor without storage, say) makes the check False: the slow path decides.
    """
    state = list(flat_inputs[:num_state])
    tensors = [t for t in state if isinstance(t, torch.Tensor)]
    names: dict[str, Any] = {
        "_is_not": operator.is_not,
        "_requires_grad": _REQUIRES_GRAD,
        "_data_ptr": torch.Tensor.data_ptr,
        "_signature": signature,
        "_state": state,
        "_tensors": tensors,
        "_grads": [t.requires_grad for t in tensors],
        "_pointers": [t.data_ptr() for t in tensors],
    }
    lines = [f"if len(flat) != {len(flat_inputs)}: return False"]
    if state:
        lines.append("if any(map(_is_not, flat, _state)): return False")
    if tensors:
        # The state tensors are the remembered objects (checked above), so read them directly.
        lines.append("if list(map(_requires_grad, _tensors)) != _grads: return False")
        lines.append("if list(map(_data_ptr, _tensors)) != _pointers: return False")
    for position in range(num_state, len(flat_inputs)):
        value = flat_inputs[position]
        lines.append(f"x = flat[{position}]")
        if isinstance(value, torch.Tensor) and position not in dynamic_positions:
            names.update({
                f"_t{position}": type(value), f"_d{position}": value.dtype, f"_s{position}": tuple(value.shape),
                f"_st{position}": tuple(value.stride()), f"_dev{position}": value.device,
            })
            # `x.is_cpu` is cheaper than building `x.device` and comparing it.
            device = "x.is_cpu" if value.device.type == "cpu" else f"x.device == _dev{position}"
            lines.append(
                f"if not (type(x) is _t{position} and x.requires_grad is {value.requires_grad} and x.dtype is "
                f"_d{position} and x.shape == _s{position} and x.stride() == _st{position} and {device}): return False"
            )
            continue
        names[f"_sig{position}"] = signature(position, value)
        if isinstance(value, torch.Tensor):
            lines.append(f"if not (isinstance(x, torch.Tensor) and x.requires_grad is {value.requires_grad}): return False")
        else:
            lines.append("if isinstance(x, torch.Tensor): return False")
        lines.append(f"if _signature({position}, x) != _sig{position}: return False")
    body = "".join(f"        {line}\n" for line in lines)
    source = f"def matches(flat):\n    try:\n{body}        return True\n    except Exception:\n        return False\n"
    names["torch"] = torch
    exec(compile(source, "<aotgrad dispatch check>", "exec"), names)
    matcher: Matcher = names["matches"]
    return matcher
