"""Writing the new values of mutated inputs back into the real inputs, batched.

A training step of a network with batch norm mutates three buffers per layer (running mean,
running variance, batches seen): resnet18 has 60. Copying them one by one costs a dispatch (and
on a GPU a kernel launch) each; `WriteBack` copies them with one `torch._foreach_copy_` per
(device, dtype) group, and not at all where the compiled graph already wrote the new value into
the input's own memory (a compiler may do that for the graph's leading outputs, see
`MUTATED_INPUTS_META`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["MUTATED_INPUTS_META", "WriteBack"]

# Key of `GraphModule.meta` on a forward graph: for each of its leading outputs, the index of the
# graph input that output is the new value of. A compiler may store such a value straight into
# that input's memory and return that input (or any tensor sharing its memory): the copy back is
# then skipped. A compiler that does so must read the old value first wherever the graph reads it.
MUTATED_INPUTS_META = "aotgrad_mutated_inputs"

_HAS_FOREACH_COPY = hasattr(torch, "_foreach_copy_")

_Group = tuple[tuple[int, ...], tuple[int, ...]]  # (input indices, result indices)


def _same_memory(value: Any, target: Any) -> bool:
    if value is target:
        return True
    # The stride of a dimension of size 1 is never used to address an element: a compiler may
    # return the input it wrote with any stride there (a stepped `x[::2]` of one row has stride 2,
    # the compiler's view of it 1), and copying such a tensor onto itself is an overlap error.
    return (
        isinstance(value, torch.Tensor)
        and value.numel() > 0
        and value.data_ptr() == target.data_ptr()
        and value.shape == target.shape
        and all(a == b for a, b, n in zip(value.stride(), target.stride(), value.shape) if n != 1)
    )


class WriteBack:
    """Copies the new values of `mutated_inputs` (the compiled graph's leading results) into them.

    The grouping is decided on the first call (devices, dtypes and shapes are fixed for one compiled
    region); later calls only gather the tensors and copy.
    """

    def __init__(self, mutated_inputs: Sequence[int], differentiable: Sequence[int] = ()) -> None:
        """`differentiable`: the slots whose new value requires grad (an in-place op on an input
        that needs no grad, with an operand that does): copied under grad mode, as eager's in-place
        op would record, so the input requires grad afterwards and gradients flow through it."""
        self._mutated = tuple(mutated_inputs)
        self._differentiable = tuple(differentiable)
        self._groups: list[_Group] | None = None
        self._singles: list[tuple[int, int]] = []

    def _plan(self, inputs: Sequence[Any], values: Sequence[Any]) -> list[_Group]:
        grouped: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
        for slot, index in enumerate(self._mutated):
            target, value = inputs[index], values[slot]
            if slot in self._differentiable:
                continue  # copied with grad mode on, in `__call__`
            if _same_memory(value, target):
                continue  # the compiled graph wrote the new value in place
            if not isinstance(value, torch.Tensor) or value.shape != target.shape:
                self._singles.append((index, slot))  # a broadcast or a number: plain copy_
                continue
            grouped.setdefault((target.device, target.dtype, value.device, value.dtype), []).append((index, slot))
        groups: list[_Group] = []
        for pairs in grouped.values():
            if len(pairs) == 1 or not _HAS_FOREACH_COPY:
                self._singles.extend(pairs)
            else:
                groups.append((tuple(i for i, _ in pairs), tuple(s for _, s in pairs)))
        return groups

    def __call__(self, inputs: Sequence[Any], values: Sequence[Any]) -> None:
        """Write `values[k]` into `inputs[mutated_inputs[k]]` for each k (under no_grad)."""
        groups = self._groups
        if groups is None:
            groups = self._groups = self._plan(inputs, values)
        # Grad mode off while copying (as `torch.no_grad()` would do, without its context manager
        # objects on every call; under no_grad, nothing to switch).
        enabled = torch.is_grad_enabled()
        if enabled:
            torch._C._set_grad_enabled(False)
        try:
            for indices, slots in groups:
                torch._foreach_copy_([inputs[i] for i in indices], [values[s] for s in slots])
            for index, slot in self._singles:
                inputs[index].copy_(values[slot])
        finally:
            if enabled:
                torch._C._set_grad_enabled(True)
        for slot in self._differentiable:
            inputs[self._mutated[slot]].copy_(values[slot])
