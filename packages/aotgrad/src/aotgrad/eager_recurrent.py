"""Recurrent layers at half precision, traced as eager's fused kernels compute them: in float32.

Eager's LSTM, GRU and RNN kernels (oneDNN on the CPU, cuDNN on CUDA) keep their gates and state in
float32 for float16 and bfloat16 tensors, rounding only what they return. Traced, the layers become
torch's decompositions (cells of matmuls and pointwise ops), which round every intermediate to the
input's dtype: where a bfloat16 LSTM's new cell state cancels (``f * c + i * g`` near 0) it came out
0.013 off a value of 0.053 where eager's was within 0.0003. `RecurrentInFloat32`, active while a graph
is traced, runs each such call on its tensors cast to float32 and casts the results back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

__all__ = ["RECURRENT", "RecurrentInFloat32"]

aten = torch.ops.aten

RECURRENT: tuple[Any, ...] = (aten.lstm, aten.gru, aten.rnn_tanh, aten.rnn_relu)
_LAYERS = frozenset({torch.lstm, torch.gru, torch.rnn_tanh, torch.rnn_relu})
_HALF = (torch.float16, torch.bfloat16)


class RecurrentInFloat32(TorchFunctionMode):
    """Calls of `torch.lstm`, `gru`, `rnn_tanh` and `rnn_relu` (what `nn.LSTM` & co. call) on float16
    or bfloat16 tensors run on their float32 copies, results cast back; other calls are unchanged."""

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func not in _LAYERS:
            return func(*args, **kwargs)
        leaves = pytree.tree_leaves((args, kwargs))
        half = next((t.dtype for t in leaves if isinstance(t, torch.Tensor) and t.dtype in _HALF), None)
        if half is None:
            return func(*args, **kwargs)
        widen = lambda t: t.to(torch.float32) if t.dtype in _HALF else t  # noqa: E731
        wide_args, wide_kwargs = pytree.tree_map_only(torch.Tensor, widen, (tuple(args), kwargs))
        out = func(*wide_args, **wide_kwargs)
        return pytree.tree_map_only(torch.Tensor, lambda t: t.to(half) if t.dtype == torch.float32 else t, out)
