"""Input tensors that share memory: the guard on which of them alias, and the graphs that must not be compiled.

A graph is compiled for one aliasing pattern of its tensor inputs. Two arguments that are views of
one base (``base[:4], base[2:]``) or the same tensor twice are one memory: a write through one is
seen through the other. Backends that functionalize the graph (aotgrad) treat each placeholder as
its own tensor, so:

* `guard_written_inputs`, for a graph that writes to an input, guards which inputs share a storage
  as on this call: a call where the pattern differs (distinct tensors before, the same tensor now)
  recompiles. (A graph that writes to no input computes the same whatever aliases what: no guard.)
* It returns the inputs that share a storage *and* that the graph writes to. Such a graph runs as
  captured, op by op on the real tensors (what eager does), instead of through the backend, for
  calls with that aliasing pattern only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from capture.sources import AttrSource, ClosureSource, GlobalSource, ItemSource, LocalSource, Source

if TYPE_CHECKING:
    from capture.guards import GuardSet
    from capture.symbolic.output_graph import GraphInput

_storage_address = torch._C._storage_address  # type: ignore[attr-defined]  # the StorageImpl of a tensor, as an int


def storage_groups(tensors: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """For each tensor, the position of the first tensor with the same storage (distinct tensors: 0, 1, 2 ...)."""
    first: dict[int, int] = {}
    return tuple(first.setdefault(address, i) for i, address in enumerate(map(_storage_address, tensors)))


def _checked(inputs: Sequence[GraphInput]) -> list[GraphInput]:
    """The inputs whose memory the guard compares: tensors with a storage, read through a guarded source."""
    return [i for i in inputs if not i.source.guard_free and i.value.layout == torch.strided and _has_storage(i.value)]


def _has_storage(tensor: torch.Tensor) -> bool:
    try:
        _storage_address(tensor)
    except Exception:  # e.g. a wrapper subclass without memory of its own
        return False
    return True


def guard_written_inputs(guards: GuardSet, inputs: Sequence[GraphInput]) -> list[list[str]]:
    """When the graph writes to an input: guard the aliasing pattern, and return the written aliased groups."""
    if not any(_written(i) for i in inputs):
        return []
    alias_guard(guards, inputs)
    return aliased_mutations(inputs)


def _written(graph_input: GraphInput) -> bool:
    """True when the trace wrote to this input (the fakes of one trace start at version 0)."""
    return bool(graph_input.node.meta["example_value"]._version)


def alias_guard(guards: GuardSet, inputs: Sequence[GraphInput]) -> tuple[int, ...]:
    """Guard which tensor inputs share a storage, as on this call; returns the groups (see `storage_groups`)."""
    checked = _checked(inputs)
    if len(checked) < 2:
        return tuple(range(len(checked)))
    groups = storage_groups([i.value for i in checked])
    exprs = [i.source.expr() for i in checked]
    tensors = f"({', '.join(exprs)},)"
    address = guards.constant(_storage_address)
    subjects = tuple(f"{address}({e})" for e in exprs)  # a failure report shows each storage's address
    if groups == tuple(range(len(groups))):
        # The common case, in one C-level pass: every storage is different.
        guards.add("TENSOR_ALIASING", "storages of " + ", ".join(exprs),
                   f"len(set(map({address}, {tensors}))) == {len(groups)}",
                   f"{', '.join(exprs)} are tensors with separate storages", subjects=subjects)
        return groups
    shared = [", ".join(e for e, g in zip(exprs, groups) if g == group) for group in sorted(set(groups))]
    guards.add("TENSOR_ALIASING", "storages of " + ", ".join(exprs),
               f"{guards.constant(storage_groups)}({tensors}) == {groups!r}",
               "storage sharing of the inputs is " + "; ".join(f"[{s}]" for s in shared), subjects=subjects)
    return groups


def aliased_mutations(inputs: Sequence[GraphInput]) -> list[list[str]]:
    """Groups of inputs (as the user's code names them) that share a storage and that the traced graph wrote to.

    A write is seen on the fake tensors: in-place ops (also through views, which share it) advance
    a tensor's version counter, and the fakes of one trace start at version 0.
    """
    checked = _checked(inputs)
    groups = storage_groups([i.value for i in checked])
    written = {g for i, g in zip(checked, groups) if _written(i)}
    return [[user_name(i.source) for i, g in zip(checked, groups) if g == group]
            for group in sorted(written) if groups.count(group) > 1]


def user_name(source: Source) -> str:
    """How the user's code names the value of `source` (``a``, ``self.weight``, ``xs[0]``)."""
    if isinstance(source, (LocalSource, GlobalSource, ClosureSource)):
        return source.name
    if isinstance(source, AttrSource):
        return f"{user_name(source.base)}.{source.attr}"
    if isinstance(source, ItemSource):
        return f"{user_name(source.base)}[{source.key!r}]"
    return source.expr()
