"""Running a group without a C++ compiler: its bodies evaluated on whole tensors with torch ops.

Used when ``CppConfig.fallback_to_eager`` is set and no compiler exists: every op runs as an
eager torch op over the whole iteration space (slower than compiled kernels, exact as eager is).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sympy
import torch

from inductor_ir import KernelGroup, TorchOpsHandler, eval_index, set_ops_handler

__all__ = ["interpreted_kernel"]


class _GroupHandler(TorchOpsHandler):  # type: ignore[misc]
    """Keeps the group's stored values: internal buffers live only here, as in registers."""

    def __init__(self, *args: Any, internal: frozenset[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.internal = internal
        self.kept: dict[str, torch.Tensor] = {}

    def load(self, name: str, index: sympy.Expr) -> torch.Tensor:
        if name in self.kept:
            return self.kept[name]
        return super().load(name, index)  # type: ignore[no-any-return]

    def store(self, name: str, index: sympy.Expr, value: Any, mode: str | None = None) -> None:
        self._keep(name, index, value)

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        self._keep(name, index, value)

    def _keep(self, name: str, index: sympy.Expr, value: Any) -> None:
        tensor = self._tensor(value)
        self.kept[name] = tensor
        if name in self.internal:
            return
        flat = self.buffers[name]
        positions = self._tensor(eval_index(index, self.env), torch.int64)
        positions, tensor = torch.broadcast_tensors(positions, tensor)
        if flat.numel():
            flat[positions.reshape(-1)] = tensor.reshape(-1).to(flat.dtype)


def _flat_view(tensor: torch.Tensor, extent: int) -> torch.Tensor:
    """A 1-D view of ``extent`` elements starting at the tensor's data pointer."""
    if extent <= 0:
        return tensor.new_empty((0,))
    return torch.as_strided(tensor, (extent,), (1,))


def interpreted_kernel(group: KernelGroup) -> Callable[..., None]:
    """A callable with the compiled kernel's calling convention, ``(*inputs, *outputs, *sizes)``."""
    records = [*group.inputs, *group.outputs]
    xs, rs = group.make_index_vars()
    internal = frozenset(r.name for r in group.internal)

    def run(*args: Any) -> None:
        sizes = {symbol: int(value) for symbol, value in zip(group.size_symbols, args[len(records) :])}

        def as_int(expr: Any) -> int:
            return int(sympy.sympify(expr).xreplace(sizes))

        buffers: dict[str, torch.Tensor] = {}
        for record, tensor in zip(records, args):
            dims = [as_int(n) for n in record.size]
            extent = 0 if any(n == 0 for n in dims) else 1 + as_int(record.offset)
            extent += sum((n - 1) * as_int(s) for n, s in zip(dims, record.stride)) if extent else 0
            buffers[record.name] = _flat_view(tensor, extent)
        for shared in group.in_place:  # an input read through the output written over it
            buffers[shared.input.name] = buffers[shared.output]
        shape = [as_int(n) for n in (*group.pointwise_size, *group.reduction_size)]
        env: dict[sympy.Symbol, Any] = dict(sizes)
        for dim, symbol in enumerate((*xs, *rs)):
            view = [1] * len(shape)
            view[dim] = shape[dim]
            env[symbol] = torch.arange(shape[dim]).reshape(view)
        handler = _GroupHandler(buffers, env, tuple(shape), len(group.reduction_size), internal=internal)
        with set_ops_handler(handler):
            for node in group.nodes:
                node.body(xs, rs if node.in_reduction_loop else ())

    return run
