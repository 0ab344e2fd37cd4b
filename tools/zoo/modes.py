"""What a zoo run does with each model: inference or training steps, with or without bf16 autocast.

The default mode (`Mode()`) is the original zoo: four inference calls under `torch.no_grad()`. The
others exist because a compiler can be right on inference in float32 and still wrong where users
are: training (gradients through aotgrad's backward graphs, in-place parameter updates between
steps) and mixed precision (autocast regions, `autocast(enabled=False)` islands inside them).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch

INFER_CALLS = (("base", 0), ("base", 0), ("base", 1), ("new", 2))
"""(input variant, seed offset) of each inference call: same input twice, new values, new shape."""

TRAIN_CALLS = (("base", 0), ("base", 1), ("new", 2))
"""Training calls, one optimizer step apart: new values of the same shape, then a new shape."""

TASKS = ("infer", "train")
AUTOCASTS = ("", "bf16")


@dataclass(frozen=True)
class Mode:
    """One zoo mode.

    Attributes:
        task: "infer" (calls under no_grad) or "train" (forward, a fixed random projection of the
            outputs as the loss, backward, every gradient compared, then a step).
        autocast: "" (float32) or "bf16" (each call under ``torch.autocast("cpu", dtype=torch.bfloat16)``,
            compared with eager under the same autocast, borderline values judged against a
            float64 eager run).
    """

    task: str = "infer"
    autocast: str = ""

    def __post_init__(self) -> None:
        if self.task not in TASKS or self.autocast not in AUTOCASTS:
            raise ValueError(f"unknown zoo mode task={self.task!r} autocast={self.autocast!r}; "
                             f"tasks {TASKS}, autocast one of {AUTOCASTS}")

    @property
    def default(self) -> bool:
        """The original zoo's mode (float32 inference)."""
        return self.task == "infer" and not self.autocast

    @property
    def calls(self) -> tuple[tuple[str, int], ...]:
        """(variant, seed offset) of each call."""
        return TRAIN_CALLS if self.task == "train" else INFER_CALLS

    @property
    def same_shape_calls(self) -> tuple[int, ...]:
        """Calls whose inputs have the shapes of an earlier call: a recompile there is a storm."""
        return (1,) if self.task == "train" else (1, 2)

    @property
    def label(self) -> str:
        """"infer", "train", "infer+bf16", "train+bf16"."""
        return self.task + (f"+{self.autocast}" if self.autocast else "")

    @property
    def low_precision(self) -> torch.dtype | None:
        """The least precise float dtype the calls compute in (None: float32)."""
        return torch.bfloat16 if self.autocast == "bf16" else None

    def autocast_context(self) -> contextlib.AbstractContextManager[Any]:
        """The autocast region each call runs in (a no-op context in float32)."""
        if self.autocast == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def to_json(self) -> dict[str, str]:
        """Plain data (the worker protocol and the results file)."""
        return {"task": self.task, "autocast": self.autocast}

    @staticmethod
    def from_json(data: dict[str, str] | None) -> Mode:
        """The mode `to_json` wrote (the default mode for None)."""
        return Mode(**data) if data else Mode()


def tolerance(compiler: str, mode: Mode) -> float:
    """Scaled max error a compiler may have against eager before the float64 reference is consulted.

    Capture-only runs the same ops as eager (differences come only from how decompositions or fused
    fast paths are chosen); aotgrad decomposes and Kiln's kernels reorder reductions. Under bf16
    autocast any reordering moves values by bf16 roundings (2**-8 relative), so the first check is
    loose and the float64 run decides the rest.
    """
    if mode.autocast == "bf16":
        return 1e-2
    return 2e-3 if compiler == "kiln-default" else 1e-4


def to_float64(value: Any) -> Any:
    """`value` (keyword arguments, nested) with every floating-point tensor made float64."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, dict):
        return {key: to_float64(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_float64(item) for item in value)
    return value
