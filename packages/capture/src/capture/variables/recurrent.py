"""Recurrent layers over long sequences run eagerly instead of unrolling.

A traced ``nn.LSTM`` / ``nn.GRU`` / ``nn.RNN`` (or ``torch.lstm``, ``torch.gru``, ...) becomes one cell
of matmuls and pointwise ops per time step: compile time grows with the sequence (about 25 ms a step
on a small GRU), and a 2,000-step layer took minutes to compile where eager runs it in
milliseconds. Up to `MAX_UNROLLED_STEPS` steps the unrolled cells compile (and fuse with their
neighbours); beyond, the layer is a graph break, with the reason, and the rest of the function
stays compiled.
"""

from __future__ import annotations

from typing import Any

import torch

from capture.variables.base import VariableTracker
from capture.variables.tensor import TensorVariable

__all__ = ["MAX_UNROLLED_STEPS", "long_recurrence"]

MAX_UNROLLED_STEPS = 64
"""The longest sequence a recurrent layer is unrolled over."""


def _steps(input_var: VariableTracker, batch_first: bool) -> int | None:
    if not isinstance(input_var, TensorVariable):
        return None  # a PackedSequence or other: left to the trace
    example: Any = input_var.example
    if not isinstance(example, torch.Tensor) or example.dim() < 2:
        return None  # an unbatched (time, features) input has its steps in dim 0 too
    steps = example.shape[1 if batch_first and example.dim() == 3 else 0]
    hint = getattr(getattr(steps, "node", None), "hint", steps)
    return int(hint) if isinstance(hint, int) else None


def long_recurrence(name: str, input_var: VariableTracker, batch_first: bool) -> str | None:
    """Why `name` over `input_var` must run eagerly (a graph break), or None when it may unroll."""
    steps = _steps(input_var, batch_first)
    if steps is None or steps <= MAX_UNROLLED_STEPS:
        return None
    return (
        f"{name} over {steps} time steps runs eagerly: compiling would unroll {steps} cells (at most "
        f"{MAX_UNROLLED_STEPS} are unrolled; compile time grows with every step)"
    )
