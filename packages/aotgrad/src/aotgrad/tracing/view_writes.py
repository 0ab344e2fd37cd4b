"""Noticing in-place writes into views while tracing, for a double backward's replay.

Eager autograd records an in-place op on a view (`t.view(-1).floor_()`) as a `CopySlices` node on
the view's base: the base's gradient is the incoming gradient with the view's part replaced by the
op's gradient, so it keeps the incoming gradient's history even where the op's own derivative has
none (`floor_`, `zero_`, `copy_` from a constant). Functionalization folds such a write back into
the base through the view's inverse, which for a view covering the whole base (`view`, `unsqueeze`,
`t`, `permute`) is a plain view: differentiated, the base's gradient is then the op's gradient alone.
The values agree; the history does not, so under ``create_graph=True`` a gradient eager gives
history (and a second derivative, zero) came out without any (fuzz 7c9650df5a). A region whose
forward writes into a view is therefore replayed from a graph that keeps its in-place ops
(`runtime/higher_order.py`), whose eager run records eager's own autograd nodes.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode


def _in_place(func: Any, kwargs: dict[str, Any]) -> bool:
    """Whether a torch-function call writes into its first argument (`x.add_(1)`, `x += 1`)."""
    name = getattr(func, "__name__", "")
    dunder_in_place = name.startswith("__i") and name.endswith("__") and name not in ("__index__", "__int__", "__invert__")
    return (name.endswith("_") and not name.startswith("__")) or dunder_in_place or kwargs.get("inplace") is True


class WritesIntoViews(TorchFunctionMode):
    """Notes (`seen`) whether the traced function runs an in-place op on a view of another tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if not self.seen and args and isinstance(args[0], torch.Tensor) and _in_place(func, kwargs):
            self.seen = _is_view(args[0])
        return func(*args, **kwargs)


def _is_view(t: torch.Tensor) -> bool:
    """Whether `t` is a view: by functionalization's record of its views inside `functionalize` (the
    one-pass trace, where the tensors autograd tracks are outside), else by autograd's."""
    if torch._is_functional_tensor(t):
        return bool(torch._C._functionalization.get_view_meta_sequence(t))
    return t._is_view()
