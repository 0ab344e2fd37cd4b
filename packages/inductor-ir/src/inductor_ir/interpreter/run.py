"""`interpret(program, inputs)`: run a lowered program with torch tensor operations, no code generator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sympy
import torch

from inductor_ir.interpreter.torch_handler import TorchOpsHandler
from inductor_ir.ir.layout import Layout
from inductor_ir.ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternKernel,
    InputBuffer,
    MultiOutput,
    Pointwise,
    ReinterpretView,
)
from inductor_ir.ir.program import Program, SizeSource
from inductor_ir.ops_handler import set_ops_handler
from inductor_ir.symbolic import index_symbol

__all__ = [
    "flat_storage",
    "index_grid",
    "interpret",
    "resolve_sizes",
    "run_extern",
    "to_int",
]


def resolve_sizes(sources: Mapping[sympy.Symbol, SizeSource], inputs: Sequence[Any]) -> dict[sympy.Symbol, int]:
    """The value of every size symbol, read from the inputs."""
    values: dict[sympy.Symbol, int] = {}
    for symbol, source in sources.items():
        if source.buffer:
            raise NotImplementedError(f"the interpreter does not run data-dependent sizes ({symbol})")
        value = inputs[source.position]
        if source.kind in ("size", "stride"):
            read = int(value.shape[source.dim] if source.kind == "size" else value.stride()[source.dim])
            values[symbol] = int(eval(source.solved(str(read)))) if source.python else read  # our own text
        else:
            values[symbol] = int(value)
    return values


def to_int(expr: Any, sizes: Mapping[sympy.Symbol, int]) -> int:
    """A size expression's value."""
    return int(sympy.sympify(expr).xreplace(dict(sizes)))


def flat_storage(tensor: torch.Tensor, layout: Layout, sizes: Mapping[sympy.Symbol, int]) -> torch.Tensor:
    """A 1-D view whose element k is ``k`` elements after ``tensor``'s data pointer."""
    numel = to_int(layout.numel(), sizes)
    length = to_int(layout.storage_size(), sizes) if numel else 0
    return torch.as_strided(tensor, (length,), (1,))


def index_grid(sizes: Sequence[int], device: torch.device | str) -> list[torch.Tensor]:
    """One ``arange`` per dim, shaped to broadcast over ``sizes``."""
    grid = []
    for k, n in enumerate(sizes):
        shape = [1] * len(sizes)
        shape[k] = n
        grid.append(torch.arange(n, device=device).reshape(shape))
    return grid


def _materialize(value: Any, tensors: Mapping[str, torch.Tensor], sizes: Mapping[sympy.Symbol, int]) -> Any:
    if isinstance(value, ReinterpretView):
        base = tensors[value.data.name]
        layout = value.layout
        return torch.as_strided(
            base,
            [to_int(s, sizes) for s in layout.size],
            [to_int(s, sizes) for s in layout.stride],
            base.storage_offset() + to_int(layout.offset, sizes),
        )
    if isinstance(value, Buffer):
        return tensors[value.name]
    if isinstance(value, sympy.Expr):
        return to_int(value, sizes) if value.is_integer or value.free_symbols else value
    if isinstance(value, (list, tuple)):
        return type(value)(_materialize(v, tensors, sizes) for v in value)
    return value


def run_extern(kernel: ExternKernel, tensors: Mapping[str, torch.Tensor], sizes: Mapping[sympy.Symbol, int]) -> Any:
    """Call an extern/fallback kernel's ATen op on real tensors."""
    args = _materialize(kernel.args, tensors, sizes)
    kwargs = {k: _materialize(v, tensors, sizes) for k, v in kernel.kwargs.items()}
    return kernel.op(*args, **kwargs)


def _with_layout(result: torch.Tensor, layout: Layout, sizes: Mapping[sympy.Symbol, int]) -> torch.Tensor:
    """``result`` if it has ``layout``'s strides, else a copy that has them."""
    size = [to_int(s, sizes) for s in layout.size]
    stride = [to_int(s, sizes) for s in layout.stride]
    if list(result.shape) == size and (result.numel() <= 1 or _same_strides(result, size, stride)):
        return result
    out = torch.empty_strided(size, stride, dtype=result.dtype, device=result.device)
    out.copy_(result)
    return out


def _same_strides(t: torch.Tensor, size: list[int], stride: list[int]) -> bool:
    return all(n == 1 or a == b for n, a, b in zip(size, t.stride(), stride))


def _run_computed(buf: ComputedBuffer, flats: dict[str, torch.Tensor], sizes: dict[sympy.Symbol, int]) -> None:
    data = buf.data
    ranges = [to_int(r, sizes) for r in data.ranges]
    device = torch.device(buf.device)
    index = [index_symbol("i", k) for k in range(len(ranges))]
    if isinstance(data, Pointwise):
        env: dict[sympy.Symbol, Any] = dict(sizes)
        env.update(zip(index, index_grid(ranges, device)))
        handler = TorchOpsHandler(flats, env, tuple(ranges), device=device)
        with set_ops_handler(handler):
            buf.store_pointwise(index)
        return
    rranges = [to_int(r, sizes) for r in data.reduction_ranges]
    rindex = [index_symbol("r", k) for k in range(len(rranges))]
    grid = index_grid(ranges + rranges, device)
    env = dict(sizes)
    env.update(zip(index + rindex, grid))
    handler = TorchOpsHandler(flats, env, tuple(ranges + rranges), len(rranges), device=device)
    with set_ops_handler(handler):
        buf.store_reduction(index, rindex)


def interpret(program: Program, inputs: Sequence[Any]) -> list[Any]:
    """Execute ``program`` on ``inputs`` (one per graph placeholder) with torch ops; return the outputs.

    Every ``ComputedBuffer`` body is evaluated once over its whole iteration space with
    :class:`TorchOpsHandler`; extern and fallback kernels call their ATen op.
    """
    sizes = resolve_sizes(program.size_sources, inputs)
    tensors: dict[str, torch.Tensor] = {}
    flats: dict[str, torch.Tensor] = {}
    for position, item in enumerate(program.graph_inputs):
        if isinstance(item, InputBuffer):
            tensors[item.name] = inputs[position]
            flats[item.name] = flat_storage(inputs[position], item.layout, sizes)
    results: dict[str, Any] = {}
    for buf in program.buffers:
        if isinstance(buf, InputBuffer):
            tensors[buf.name] = program.constants[buf.name]
        elif isinstance(buf, ComputedBuffer):
            layout = buf.layout
            tensors[buf.name] = torch.empty_strided(
                [to_int(s, sizes) for s in layout.size],
                [to_int(s, sizes) for s in layout.stride],
                dtype=layout.dtype,
                device=layout.device,
            )
            flats[buf.name] = flat_storage(tensors[buf.name], layout, sizes)
            _run_computed(buf, flats, sizes)
            continue
        elif isinstance(buf, ExternKernel):
            result = run_extern(buf, tensors, sizes)
            if buf.output_is_tuple:
                results[buf.name] = result
                continue
            tensors[buf.name] = _with_layout(result, buf.layout, sizes)
        elif isinstance(buf, MultiOutput):
            value = results[buf.parent]
            for k in buf.path:
                value = value[k]
            tensors[buf.name] = _with_layout(value, buf.layout, sizes)
        flats[buf.name] = flat_storage(tensors[buf.name], buf.layout, sizes)
    return [_materialize(out, tensors, sizes) for out in program.outputs]
