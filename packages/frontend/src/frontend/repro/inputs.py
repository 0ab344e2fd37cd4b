"""The inputs of a repro script as Python source: saved values when small, seeded random ones otherwise.

A repro script must rebuild the failing graph's inputs with the same sizes, strides, dtypes and
devices. Real tensors whose data fits the script's budget are embedded (base64 of `torch.save`);
the others, and every fake tensor (aotgrad hands its compilers fake tensors), are drawn at random
by the script's `rand_strided` helper (see `HELPERS`), from a fixed seed.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from typing import Any

import torch

DEFAULT_SAVED_BYTES = 1 << 20
"""How many bytes of tensor data one repro script embeds at most (the rest is random)."""

HELPERS = '''
def rand_strided(shape, stride, dtype, device="cpu", requires_grad=False, offset=0):
    """A tensor with these sizes, strides and dtype, filled with seeded random values."""
    extent = offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else offset
    if dtype.is_floating_point or dtype.is_complex:
        base = torch.randn(extent, dtype=dtype, device=device)
    elif dtype == torch.bool:
        base = torch.rand(extent, device=device) < 0.5
    else:
        base = torch.randint(0, 3, (extent,), dtype=dtype, device=device)
    tensor = base.as_strided(shape, stride, offset)
    return tensor.requires_grad_() if requires_grad else tensor


def saved(data, stride, device="cpu", requires_grad=False):
    """A tensor embedded in this script (its values, laid out with `stride` where possible)."""
    values = torch.load(io.BytesIO(base64.b64decode(data)), weights_only=True).to(device)
    if values.dim() and stride != values.stride() and len(set(stride)) == len(stride) and min(stride) > 0:
        values = torch.empty_strided(values.shape, stride, dtype=values.dtype, device=device).copy_(values)
    return values.requires_grad_() if requires_grad else values
'''
"""Functions every repro script defines (it imports only torch, base64 and io for them)."""


@dataclass
class SavedBudget:
    """How many more bytes of tensor data may be embedded in the script being written."""

    remaining: int = DEFAULT_SAVED_BYTES


def concrete_int(value: Any) -> int:
    """`value` as a Python int: a symbolic size gives its hint (the size it had when traced)."""
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        return int(hint if hint is not None else value.node.shape_env.size_hint(value.node.expr))
    return int(value)


def is_real(tensor: torch.Tensor) -> bool:
    """Whether `tensor` holds data (not a fake or meta tensor)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return not isinstance(tensor, FakeTensor) and tensor.device.type != "meta"


def _tensor_source(tensor: torch.Tensor, budget: SavedBudget) -> str:
    shape = tuple(concrete_int(n) for n in tensor.shape)
    stride = tuple(concrete_int(n) for n in tensor.stride())
    device = str(tensor.device)
    grad = ", requires_grad=True" if tensor.requires_grad else ""
    size = tensor.numel() * tensor.element_size()
    if is_real(tensor) and size <= budget.remaining and tensor.layout == torch.strided:
        budget.remaining -= size
        buffer = io.BytesIO()
        torch.save(tensor.detach().cpu().contiguous().clone(), buffer)
        data = base64.b64encode(buffer.getvalue()).decode()
        return f"saved({data!r}, {stride}, {device!r}{grad})"
    offset = concrete_int(tensor.storage_offset()) if is_real(tensor) else 0
    where = f", offset={offset}" if offset else ""
    return f"rand_strided({shape}, {stride}, {tensor.dtype}, {device!r}{grad}{where})"


def value_source(value: Any, budget: SavedBudget) -> str:
    """A Python expression that rebuilds `value` (a tensor, a number, None, or a tuple/list of them)."""
    if isinstance(value, torch.Tensor):
        return _tensor_source(value, budget)
    if isinstance(value, torch.SymInt):
        return repr(concrete_int(value))
    if isinstance(value, torch.SymFloat):
        return repr(float(value.node.hint))
    if isinstance(value, torch.SymBool):
        return repr(bool(value.node.hint))
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    if isinstance(value, (torch.dtype, torch.device)):
        return f"torch.{value}" if isinstance(value, torch.dtype) else f"torch.device({str(value)!r})"
    if isinstance(value, (tuple, list, torch.Size)):
        items = ", ".join(value_source(item, budget) for item in value)
        return f"({items},)" if isinstance(value, tuple) and len(value) == 1 else (
            f"({items})" if isinstance(value, tuple) else f"[{items}]"
        )
    raise TypeError(f"a repro script cannot rebuild a {type(value).__name__} input")


def inputs_source(values: list[Any], budget: SavedBudget | None = None) -> str:
    """The body of the script's ``make_inputs()``: one line per input, seeded first."""
    budget = budget if budget is not None else SavedBudget()
    lines = ["torch.manual_seed(0)", "return ["]
    lines += [f"    {value_source(value, budget)}," for value in values]
    lines.append("]")
    return "\n".join(lines)
