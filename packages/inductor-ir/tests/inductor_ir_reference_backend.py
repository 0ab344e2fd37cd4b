"""A real (if slow) `KernelBackend` for tests: it runs each group's node bodies with torch ops.

It follows docs/kernel-backend.md to the letter: nodes run in the record's order, in-loop nodes
over the whole (pointwise, reduction) space, reductions finish before later nodes read them, and
loads of buffers written earlier in the group are forwarded from the stored value (checking that
the load index is the store index, as the scheduler guarantees).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from inductor_ir import (
    KernelGroup,
    KernelSource,
    TorchOpsHandler,
    describe_group,
    eval_index,
    set_ops_handler,
)


class ForwardingHandler(TorchOpsHandler):
    """``TorchOpsHandler`` that keeps values stored in this group and forwards them to later loads."""

    def __init__(self, *args: Any, internal: set[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.internal = internal
        self.values: dict[str, tuple[sympy.Expr, torch.Tensor]] = {}

    def load(self, name: str, index: sympy.Expr) -> torch.Tensor:
        if name in self.values:
            stored_index, value = self.values[name]
            assert sympy.expand(stored_index - index) == 0, f"{name} loaded at {index}, stored at {stored_index}"
            return value
        assert name not in self.internal, f"internal buffer {name} loaded before it was stored"
        return super().load(name, index)

    def store(self, name: str, index: sympy.Expr, value: Any, mode: str | None = None) -> None:
        self._keep(name, index, value)

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        self._keep(name, index, value)

    def _keep(self, name: str, index: sympy.Expr, value: Any) -> None:
        self.values[name] = (index, self._tensor(value))
        if name not in self.internal:
            flat = self.buffers[name]
            idx, val = torch.broadcast_tensors(self._tensor(eval_index(index, self.env), torch.int64), self._tensor(value))
            if flat.numel():
                flat[idx.reshape(-1)] = val.reshape(-1).to(flat.dtype)


def _flat(tensor: torch.Tensor, size: Sequence[int], stride: Sequence[int], offset: int) -> torch.Tensor:
    if any(n == 0 for n in size):
        return tensor.new_empty((0,))
    length = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
    return torch.as_strided(tensor, (length,), (1,))


def make_kernel(group: KernelGroup) -> Callable[..., None]:
    """A callable ``(*inputs, *outputs, *sizes)`` computing ``group``."""
    records = list(group.inputs) + list(group.outputs)
    xs, rs = group.make_index_vars()
    internal = {r.name for r in group.internal}

    def kernel(*args: Any) -> None:
        assert len(args) == len(records) + len(group.size_symbols), (group.name, len(args))
        sizes = dict(zip(group.size_symbols, args[len(records) :]))
        ints = {k: int(v) for k, v in sizes.items()}

        def value(expr: Any) -> int:
            return int(sympy.sympify(expr).xreplace(ints))

        flats = {}
        for record, tensor in zip(records, args):
            assert isinstance(tensor, torch.Tensor), (record.name, type(tensor))
            assert tensor.dtype == record.dtype, (record.name, tensor.dtype, record.dtype)
            flats[record.name] = _flat(tensor, [value(s) for s in record.size], [value(s) for s in record.stride], value(record.offset))
        for shared in group.in_place:  # an input read through the output written over it
            flats[shared.input.name] = flats[shared.output]
        shape = [value(s) for s in group.pointwise_size + group.reduction_size]
        device = args[0].device if records else torch.device("cpu")
        env: dict[sympy.Symbol, Any] = dict(ints)
        for k, (symbol, n) in enumerate(zip(xs + rs, shape)):
            view = [1] * len(shape)
            view[k] = n
            env[symbol] = torch.arange(n, device=device).reshape(view)
        handler = ForwardingHandler(flats, env, tuple(shape), len(group.reduction_size), device=device, internal=internal)
        with set_ops_handler(handler):
            for node in group.nodes:
                node.body(xs, rs if node.in_reduction_loop else ())

    return kernel


class ReferenceBackend:
    """Executes kernel groups through torch; accepts every fusion the IR allows."""

    def __init__(self, device_type: str = "cpu", *, fuse_reductions: bool = True) -> None:
        self.device_type = device_type
        self.fuse_reductions = fuse_reductions
        self.generated: list[KernelGroup] = []

    def can_fuse_vertical(self, producer: KernelGroup, consumer: KernelGroup) -> bool:
        return self.fuse_reductions or not (producer.is_reduction or consumer.is_reduction)

    def can_fuse_horizontal(self, first: KernelGroup, second: KernelGroup) -> bool:
        return self.can_fuse_vertical(first, second)

    def generate(self, group: KernelGroup) -> KernelSource:
        self.generated.append(group)
        return KernelSource(f"ref_{group.name}", describe_group(group), group)

    def compile(self, sources: Sequence[KernelSource]) -> list[Callable[..., None]]:
        return [make_kernel(source.group) for source in sources]
