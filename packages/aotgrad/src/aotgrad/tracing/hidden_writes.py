"""In-place writes that eager's autograd does not record, kept in the functional forward graph.

Eager lets a program write into a tensor without telling autograd: under `torch.no_grad()` (or
`inference_mode`, `set_grad_enabled(False)`), through `t.data`, through a `t.detach()` alias. The
tensor's value becomes the written value `c`, but its autograd history stays what it was: a later
backward flows to the old history as if the write had not happened (a "straight-through" write:
clipping an activation or a weight in place under no_grad, an optimizer's `p.add_(...)`).

The forward is traced below autograd, functionalized: the write's functional value would carry the
gradient of the op that wrote it (or none, detached as a gradient barrier). `HiddenWrites` (a
torch-function mode, above functionalization, where the write is one call) sees such a write, and
makes the written storage's new value `straight_through(old, c)`: an op whose value is exactly `c`
and whose gradient goes to `old` unchanged (`aotgrad::straight_through`; the joint trace runs it as
`StraightThrough`, a clone of `c` with the identity gradient for `old`, and the clone of `old`
taken for it is dead code once the joint graph is cleaned).

A tensor saved for backward before such a write: eager raises at backward when the write bumped its
version (no_grad, `detach()`), or computes with the new values (`.data`). The joint trace bumps the
old value's version, so autograd raises there and the region runs eagerly, with eager's behaviour.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import statically_known_true
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from aotgrad.errors import TracingError


@torch.library.custom_op("aotgrad::straight_through", mutates_args=())
def _straight_through(old: torch.Tensor, value: torch.Tensor, operands: list[torch.Tensor]) -> torch.Tensor:
    """`value` (a copy), with the gradient of `old` (the identity): a write autograd does not see.
    `operands`: the write's other tensors, where eager would give the written alias a history."""
    del old, operands
    return value.clone()


@_straight_through.register_fake
def _straight_through_fake(old: torch.Tensor, value: torch.Tensor, operands: list[torch.Tensor]) -> torch.Tensor:
    del old, operands
    return value.clone()


def _straight_through_backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
    del ctx
    return grad, None, None


_straight_through.register_autograd(_straight_through_backward)

STRAIGHT_THROUGH: torch._ops.OpOverload = torch.ops.aotgrad.straight_through.default
"""The op the forward graph holds for a write autograd does not record: `(old, value, operands) -> value`."""


class StraightThrough(torch.autograd.Function):
    """`straight_through(old, value)` for the joint trace: a clone of `value`, whose gradient goes to
    `old` as it is (`value` gets none)."""

    @staticmethod
    def forward(ctx: Any, old: torch.Tensor, value: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """The written value."""
        del ctx, old
        return value.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        """The incoming gradient, for `old`."""
        del ctx
        return grad, None


def bump_version_of_overwritten(value: Any) -> None:
    """In the joint trace, as a hidden write's snapshot of `value` is taken: bump `value`'s version,
    as eager's write does, so that autograd raises eager's error where an op saved it for backward."""
    if isinstance(value, torch.Tensor):
        torch.autograd.graph.increment_version(value)


def straight_through_in_joint(old: torch.Tensor, value: torch.Tensor, operands: list[torch.Tensor]) -> torch.Tensor:
    """Run `straight_through` in the joint trace (under autograd). An operand that requires grad
    (`h.detach().add_(w)`, `w` requiring grad: eager gives the alias a history and keeps `h`'s)
    cannot be expressed: `TracingError`."""
    if any(t.requires_grad for t in operands):
        raise TracingError(
            "a write through a `.detach()` / `.data` alias takes a gradient from its operands while the "
            "aliased tensor keeps its own history; aotgrad cannot give one memory two histories, so this "
            "graph runs eagerly (write into a `clone()` to compile it)",
            None,
        )
    return StraightThrough.apply(old, value)  # type: ignore[no-any-return]


def fold_straight_through_copies(gm: torch.fx.GraphModule) -> None:
    """In a traced joint graph, `copy(dst, clone(dst))` (a straight-through write of `dst` onto its own
    memory: the value is `dst`) is `dst`: no copies are left for an optimizer-style update."""
    aten = torch.ops.aten
    for node in list(gm.graph.nodes):
        if node.target is not aten.copy.default or len(node.args) < 2:
            continue
        dst, src = node.args[0], node.args[1]
        if not (isinstance(src, torch.fx.Node) and src.target is aten.clone.default):
            continue
        if _unaliased(src.args[0]) is not _unaliased(dst):
            continue
        if not src.kwargs and not node.kwargs:
            node.replace_all_uses_with(dst)


def _unaliased(node: Any) -> Any:
    """`node` through `detach` / `alias` nodes (the joint trace records detaches as aliases)."""
    aten = torch.ops.aten
    while isinstance(node, torch.fx.Node) and node.target in (aten.detach.default, aten.alias.default):
        node = node.args[0]
    return node


# Tensor methods whose name ends in `_` but that change no data (or only metadata, refused elsewhere).
_NOT_WRITES = frozenset(
    {"requires_grad_", "retain_grad_", "share_memory_", "set_", "resize_", "resize_as_", "detach_",
     "t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "swapdims_", "swapaxes_", "record_stream_",
     "register_hook_", "pin_memory_", "_fix_weakref_"}
)
_IN_PLACE_OPERATORS = frozenset(
    {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__", "__iand__",
     "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__", "__setitem__"}
)


def _written_tensors(func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors a torch-level call writes into (by the naming conventions of in-place ops)."""
    out = kwargs.get("out")
    if out is not None:
        return [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    name = getattr(func, "__name__", "")
    first = args[0] if args else None
    writes = kwargs.get("inplace") is True or name in _IN_PLACE_OPERATORS or (
        name.endswith("_") and not name.startswith("__") and name not in _NOT_WRITES
    )
    if not writes:
        return []
    return [t for t in pytree.tree_leaves(first) if isinstance(t, torch.Tensor)]


def _storage(t: torch.Tensor) -> Any:
    return StorageWeakRef(t.untyped_storage()).cdata


def _spans_storage(t: torch.Tensor) -> bool:
    """Whether `t` holds the whole of its storage (functionalization's view tracking is hidden from
    Python, so a storage's base is recognised so): a write through it is a write into the base."""
    # Without guards: symbolic sizes stay symbolic (an unproven span is no base: the write is refused).
    spans = (t.storage_offset() == 0) & (t.numel() * t.element_size() == t.untyped_storage().nbytes())
    return statically_known_true(spans)


@dataclasses.dataclass
class BarrierSwitch:
    """The switch `_GradientBarriers` reads: while `passing`, results under grad mode off are not detached."""

    passing: bool = False


class HiddenWrites(TorchFunctionMode):
    """Makes each write that eager's autograd does not record a straight-through write (see the module
    docstring): `base.copy_(straight_through(base_before, base))` after it, with the gradient barriers
    lifted, where `base` is the tensor that spans the written memory.

    Args:
        inputs: the traced function's flat inputs (their storages' bases).
        barrier: the gradient barriers' switch.

    After the trace, `hidden_only` holds the inputs whose every write was hidden from autograd: their
    new value is written back under no_grad (the input keeps its history, a leaf included).
    """

    def __init__(self, inputs: tuple[Any, ...], barrier: BarrierSwitch) -> None:
        super().__init__()
        self._barrier = barrier
        self._bases: dict[Any, torch.Tensor] = {}
        self._input_of: dict[Any, int] = {}
        for index, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                self._bases.setdefault(_storage(x), x)
                self._input_of.setdefault(_storage(x), index)
        self._aliases: set[int] = set()  # ids of `.detach()` / `.data` aliases, and views of them
        self._keep: list[torch.Tensor] = []  # keeps the ids above unique
        self._hidden: set[int] = set()
        self._recorded: set[int] = set()

    @property
    def hidden_only(self) -> frozenset[int]:
        """Inputs written only by writes autograd does not record."""
        return frozenset(self._hidden - self._recorded)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        written = _written_tensors(func, args, kwargs)
        hidden = [t for t in written if not torch.is_grad_enabled() or id(t) in self._aliases]
        snapshots = self._snapshots(hidden)
        # Under grad mode, the write gives the alias a history from its other tensors (checked in
        # the joint trace: `straight_through_in_joint`); under no_grad, none.
        operands = [] if not torch.is_grad_enabled() else [
            t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and not any(t is w for w in written)
        ]
        for t in written:
            if t not in hidden and _storage(t) in self._input_of:
                self._recorded.add(self._input_of[_storage(t)])
        out = func(*args, **kwargs)
        self._note(func, args, out)
        for base, before in snapshots:
            with torch.no_grad(), self._lifted():
                base.copy_(STRAIGHT_THROUGH(before, base.detach(), operands))
        return out

    def _snapshots(self, hidden: list[torch.Tensor]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(base, a copy of its value) for each storage `hidden` writes into."""
        snapshots: list[tuple[torch.Tensor, torch.Tensor]] = []
        seen: set[Any] = set()
        for t in hidden:
            storage = _storage(t)
            if storage in seen:
                continue
            seen.add(storage)
            base = self._bases.get(storage)
            if base is None or not _spans_storage(base):
                base = t
            if not _spans_storage(base):
                raise TracingError(
                    "a tensor is written in place under no_grad (or through `.data` / `.detach()`), and "
                    "aotgrad cannot tell which tensor owns its memory; this graph runs eagerly",
                    None,
                )
            if storage in self._input_of:
                self._hidden.add(self._input_of[storage])
            with self._lifted():
                snapshots.append((base, base.clone()))
        return snapshots

    def _note(self, func: Any, args: Any, out: Any) -> None:
        """Record new storages' bases, and `.detach()` / `.data` aliases (and views of them)."""
        first = args[0] if args else None
        aliasing = func in _DETACHING or (isinstance(first, torch.Tensor) and id(first) in self._aliases)
        for t in pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = _storage(t)
            self._bases.setdefault(storage, t)  # the first tensor seen of a storage: mostly its base
            if aliasing and isinstance(first, torch.Tensor) and storage == _storage(first):
                self._aliases.add(id(t))
                self._keep.append(t)

    def _lifted(self) -> Any:
        return _Lifted(self._barrier)


_DETACHING = frozenset({torch.Tensor.detach, torch.detach, torch.Tensor.data.__get__})  # type: ignore[attr-defined]


class _Lifted:
    """Lifts the gradient barriers for a block (the straight-through write and its snapshot)."""

    def __init__(self, barrier: BarrierSwitch) -> None:
        self._barrier = barrier
        self._was = barrier.passing

    def __enter__(self) -> None:
        self._barrier.passing = True

    def __exit__(self, *exc: Any) -> None:
        self._barrier.passing = self._was
