"""Outputs of CUDA graph replays that live in the graph's own memory, checked on every use.

With ``cudagraph_copy_outputs=False`` a replay returns views of the graph's static output buffers
instead of copies (no copy kernel per output). The next replay overwrites those buffers, so each
returned tensor is a `CudaGraphOutput` that remembers which replay produced it: using it after a
later replay raises `CudaGraphOutputOverwrittenError`, which names the fix, instead of silently
reading the newer call's values. Results of operations on such a tensor are ordinary tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from frontend.errors import CudaGraphOutputOverwrittenError


class ReplayCounter:
    """How many times one recorded CUDA graph has been replayed (outputs compare against it)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.replays = 0


class CudaGraphOutput(torch.Tensor):
    """A view of a CUDA graph's output buffer, valid until the graph is replayed again."""

    _kiln_counter: ReplayCounter
    _kiln_replay: int

    def check(self) -> None:
        """Raise if a later replay has overwritten this tensor's memory."""
        counter = self.__dict__.get("_kiln_counter")
        if counter is None or counter.replays == self._kiln_replay:
            return
        later = counter.replays - self._kiln_replay
        raise CudaGraphOutputOverwrittenError(
            f"this tensor is an output of call {self._kiln_replay} of the CUDA-graph-replayed {counter.label}, "
            f"and {later} later call(s) have overwritten its memory (mode='reduce-overhead' with "
            "cudagraph_copy_outputs=False returns the graph's own output buffers). Fix: clone the output "
            "before calling the compiled function again (out = compiled(x).clone()), or compile without "
            "options={'cudagraph_copy_outputs': False} so every call returns fresh tensors."
        )

    @classmethod
    def __torch_function__(
        cls, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        for value in pytree.tree_leaves((args, kwargs)):
            if isinstance(value, CudaGraphOutput):
                value.check()
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


def guard_outputs(outputs: Any, counter: ReplayCounter) -> Any:
    """`outputs` with every tensor replaced by a checked view of it, tied to `counter`'s current replay."""

    def wrap(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        view = value.detach().as_subclass(CudaGraphOutput) if not value.requires_grad else value
        if isinstance(view, CudaGraphOutput):
            view.__dict__["_kiln_counter"] = counter
            view.__dict__["_kiln_replay"] = counter.replays
        return view

    return pytree.tree_map(wrap, outputs)
