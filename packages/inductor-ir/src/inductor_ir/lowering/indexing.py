"""Lowerings that read by computed or data-dependent indices: cat, pad, index, gather, embedding, index_select."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.checks import IndexCheck
from inductor_ir.ir.layout import Layout, contiguous_strides
from inductor_ir.ir.nodes import Buffer, ExternKernel, IRNode, Pointwise, ReinterpretView
from inductor_ir.lowering.common import (
    broadcast_shapes,
    const,
    convert,
    expand_loader,
    load_converted,
    promote_dtypes,
    require_same_device,
)
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import FloorDiv

aten = torch.ops.aten
Index = Sequence[sympy.Expr]


@lowering(aten.cat.default)
def cat(ctx: LoweringContext, tensors: Sequence[IRNode], dim: int = 0) -> Pointwise | ExternKernel:
    """Concatenation along ``dim``: each input is read under a mask of its range.

    On CPU, a concatenation of values already in memory whose result is stored anyway (it feeds an
    extern call such as a matmul, or is a graph output) is ATen's ``cat``, a copy at memory speed:
    there is nothing to fuse, and a kernel reading every element under per-input masks is slower.
    """
    # Legacy rule: 1-d empty tensors are skipped.
    kept = [
        (t, n)
        for t, n in zip(tensors, _part_nodes(ctx, tensors))
        if not (len(t.get_size()) == 1 and t.get_size()[0] == 0)
    ]
    if not kept:
        raise NotLowerable("cat of empty tensors")
    require_same_device(*(t for t, _ in kept))
    ndim = len(kept[0][0].get_size())
    dim = dim % ndim
    dtype = ctx.out_dtype(promote_dtypes(*(t for t, _ in kept)))
    parts = _with_fills_merged(ctx, kept, dim)
    if len(parts) > MAX_CPU_CAT_PARTS and parts[0].device.startswith("cpu"):
        return _aten_cat(ctx, [ctx.realize(p) for p in parts], dim, dtype)
    while len(parts) > MAX_CAT_PARTS:
        parts = _cats_of_groups(ctx, parts, dim, dtype)
    if len(parts) > 1 and _copy_by_aten(ctx, parts):
        return _aten_cat(ctx, parts, dim, dtype)
    return _masked_cat(ctx, parts, dim, dtype)


MAX_CAT_PARTS = 64
"""The most parts one masked concatenation reads. Each of its elements selects among all its parts,
and its kernel's code grows with their number: a cat of 2,053 parts (the gradient of ``split(1)``
over that many columns) kept the C++ compiler busy for minutes. With more parts, on CPU each part is
stored and ATen's ``cat`` copies them; elsewhere they are concatenated in groups, each group stored,
then those buffers."""

MAX_CPU_CAT_PARTS = 16
"""On CPU, the most parts one masked concatenation reads; beyond, each part is stored by its own kernel
and ATen's ``cat`` copies them. Each part may be a fused computation: the gradient of a 64-step GRU
concatenated its 64 steps' gate arithmetic into one 5,000-line function that g++ -O3 compiled for
minutes (fuzz b2a63fb87d); 64 small kernels compile in seconds."""


def _cats_of_groups(
    ctx: LoweringContext, parts: Sequence[IRNode], dim: int, dtype: torch.dtype
) -> list[IRNode]:
    """`parts` concatenated in groups of `MAX_CAT_PARTS`, each group stored: one buffer per group."""
    groups = [parts[i : i + MAX_CAT_PARTS] for i in range(0, len(parts), MAX_CAT_PARTS)]
    return [ctx.realize(_masked_cat(ctx, group, dim, dtype)) for group in groups]


def _part_nodes(ctx: LoweringContext, tensors: Sequence[IRNode]) -> list[Any]:
    """The FX node of each part of the cat being lowered (None where not known)."""
    args = ctx.node.args if ctx.node is not None else ()
    nodes = args[0] if args and isinstance(args[0], (list, tuple)) else ()
    return list(nodes) if len(nodes) == len(tensors) else [None] * len(tensors)


# Creation ops whose result holds one value throughout, and where their argument lists hold it.
_FILLS: dict[Any, int | None] = {
    aten.zeros.default: None,
    aten.zeros_like.default: None,
    aten.new_zeros.default: None,
    aten.ones.default: None,
    aten.ones_like.default: None,
    aten.new_ones.default: None,
    aten.full.default: 1,
    aten.full_like.default: 1,
    aten.new_full.default: 2,
}


def _fill_of(node: Any) -> tuple[str, Any] | None:
    """The value a creation node fills its result with (its ``repr`` first, which tells ``-0.0`` from
    ``0.0`` and equals for NaNs, then the value), or None for any other node."""
    if not isinstance(node, torch.fx.Node) or node.target not in _FILLS:
        return None
    position = _FILLS[node.target]
    if position is None:
        value: Any = 0 if "zeros" in str(node.target) else 1
    else:
        value = node.args[position] if len(node.args) > position else node.kwargs.get("fill_value")
    return (repr(value), value) if type(value) in (bool, int, float) else None


def _with_fills_merged(ctx: LoweringContext, kept: Sequence[tuple[IRNode, Any]], dim: int) -> list[IRNode]:
    """The parts, each run of adjacent parts filled with one value (of one dtype) as one part: the
    gradient of a ``split`` of which few pieces are used is a cat of many zeros."""
    runs: list[tuple[Any, Any, list[IRNode]]] = []  # (what fills them or None, the value, the parts)
    for t, node in kept:
        fill = _fill_of(node)
        key = None if fill is None else (fill[0], t.dtype, t.device, len(t.get_size()))
        if key is not None and runs and runs[-1][0] == key:
            runs[-1][2].append(t)
        else:
            runs.append((key, fill[1] if fill is not None else None, [t]))
    return [run[0] if len(run) == 1 else _filled_like(ctx, run, dim, value) for _, value, run in runs]


def _filled_like(ctx: LoweringContext, run: Sequence[IRNode], dim: int, value: Any) -> Pointwise:
    """One part holding `value`, as long along `dim` as the parts of `run` together."""
    size = list(run[0].get_size())
    size[dim] = sum((t.get_size()[dim] for t in run), sympy.Integer(0))
    dtype = run[0].dtype
    return Pointwise(lambda index: const(value, dtype), tuple(size), dtype, run[0].device, (ctx.origin,))


def _masked_cat(ctx: LoweringContext, parts: Sequence[IRNode], dim: int, dtype: torch.dtype) -> Pointwise:
    """The concatenation of `parts` along `dim` as one pointwise value: each element loads from the
    part whose range holds it."""
    offsets, start = [], sympy.Integer(0)
    for t in parts:
        offsets.append(start)
        start = start + t.get_size()[dim]
    size = list(parts[0].get_size())
    size[dim] = start
    loaders = [(t.make_loader(), t.dtype) for t in parts]

    def inner(index: Index) -> Any:
        i = ops.index_expr(index[dim], torch.int64)
        result = None
        for k in reversed(range(len(parts))):
            load, src = loaders[k]
            shifted = list(index)
            shifted[dim] = index[dim] - offsets[k]
            if len(parts) == 1:
                return convert(load(shifted), dtype, src)
            end = offsets[k] + parts[k].get_size()[dim]
            mask = None
            if k > 0:
                mask = ops.ge(i, ops.index_expr(offsets[k], torch.int64))
            if k < len(parts) - 1:
                below = ops.lt(i, ops.index_expr(end, torch.int64))
                mask = below if mask is None else ops.logical_and(mask, below)
            value = ops.masked(mask, functools.partial(load_converted, load, shifted, dtype, src), _zero(dtype))
            result = value if result is None else ops.where(mask, value, result)
        return result

    return Pointwise(inner, tuple(size), dtype, parts[0].device, (ctx.origin,))


# Ops that only reinterpret memory: a cat's value reaches their users unchanged.
_VIEW_OPS = frozenset([
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default, aten.t.default,
    aten.transpose.int, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default, aten.alias.default,
])  # fmt: skip


def _stored_anyway(node: torch.fx.Node) -> bool:
    """Whether ``node``'s value is written to memory whatever we do: a graph output, or (through views)
    an argument of an extern call (matmuls, convolutions, attention), which reads buffers."""
    from inductor_ir.lowering.extern import EXTERN_OPS

    pending, seen = [node], set()
    while pending:
        current = pending.pop()
        for user in current.users:
            if user in seen:
                continue
            seen.add(user)
            if user.op == "output" or user.target in EXTERN_OPS:
                return True
            if user.target in _VIEW_OPS:
                pending.append(user)
    return False


def _copy_by_aten(ctx: LoweringContext, parts: Sequence[IRNode]) -> bool:
    """A CPU concatenation of buffers (or strided views of them) whose result is stored anyway."""
    if not parts[0].device.startswith("cpu") or ctx.node is None:
        return False
    in_memory = all(isinstance(p, ReinterpretView) or (isinstance(p, Buffer) and not getattr(p, "output_is_tuple", False)) for p in parts)
    return in_memory and _stored_anyway(ctx.node)


def _aten_cat(ctx: LoweringContext, parts: Sequence[IRNode], dim: int, dtype: torch.dtype) -> ExternKernel:
    """``aten.cat`` as an extern call on the parts as they lie in memory (no copy before it)."""
    from inductor_ir.lower import layout_of

    val = ctx.meta()
    if isinstance(val, torch.Tensor):
        layout = layout_of(val)
    else:
        size = list(parts[0].get_size())
        size[dim] = sum((p.get_size()[dim] for p in parts), sympy.Integer(0))
        layout = Layout(parts[0].device, dtype, tuple(size), contiguous_strides(size))
    kernel = ExternKernel(ctx.new_name(), layout, aten.cat.default, (list(parts), dim))
    ctx.register(kernel)
    return kernel


def _zero(dtype: torch.dtype) -> bool | int | float:
    if dtype == torch.bool:
        return False
    return 0.0 if dtype.is_floating_point else 0


@lowering(aten.constant_pad_nd.default)
def constant_pad_nd(ctx: LoweringContext, x: IRNode, pad: Sequence[Any], value: Any = 0) -> Pointwise:
    """Pad (or crop, with negative pads) the last dims with a constant."""
    size = list(x.get_size())
    out = list(size)
    lows: dict[int, sympy.Expr] = {}
    for k in range(len(pad) // 2):
        d = len(size) - 1 - k
        lo, hi = sympy.Integer(int(pad[2 * k])), sympy.Integer(int(pad[2 * k + 1]))
        lows[d] = lo
        out[d] = size[d] + lo + hi
    load, dtype = x.make_loader(), x.dtype
    fill = bool(value) if dtype == torch.bool else (float(value) if dtype.is_floating_point else int(value))

    def inner(index: Index) -> Any:
        shifted = [index[d] - lows.get(d, 0) for d in range(len(size))]
        mask = None
        for d in lows:
            j = ops.index_expr(shifted[d], torch.int64)
            ok = ops.logical_and(ops.ge(j, ops.constant(0, torch.int64)), ops.lt(j, ops.index_expr(size[d], torch.int64)))
            mask = ok if mask is None else ops.logical_and(mask, ok)
        if mask is None:
            return load(shifted)
        return ops.masked(mask, lambda: load(shifted), fill)

    return Pointwise(inner, tuple(out), dtype, x.device, (ctx.origin,))


def _indirect(value: Any, dtype: torch.dtype, size: sympy.Expr, check: IndexCheck | bool, wrap: bool) -> sympy.Symbol:
    """The index ``value`` as an indirect index into a dim of ``size``: checked as eager checks it
    (``check``), negative values counted from the end where the op does so (``wrap``)."""
    return ops.indirect_indexing(convert(value, torch.int64, dtype), size, check=check, wrap_neg=wrap)


def _checks_every_index(sizes: Sequence[Any], op: str) -> None:
    """Refuse (fall back to eager's kernel) where the indexed tensor has no elements: a kernel over
    an output with none checks no index, where eager checks each (and raises); and every index into
    a dim of size 0 is out of range, with eager's own error."""
    if any(sympy.sympify(s) == 0 for s in sizes):
        raise NotLowerable(f"{op} of a tensor with no elements: eager checks every index")


@lowering(aten.embedding.default)
def embedding(ctx: LoweringContext, weight: IRNode, indices: IRNode, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Pointwise:  # fmt: skip
    """``weight[indices]``: rows picked by data."""
    require_same_device(weight, indices)
    wsize = weight.get_size()
    isize = indices.get_size()
    _checks_every_index(wsize, "embedding")
    wload, iload, idtype = weight.make_loader(), indices.make_loader(), indices.dtype
    check = ctx.index_check("IndexError", 0)

    def inner(index: Index) -> Any:
        row = _indirect(iload(index[: len(isize)]), idtype, wsize[0], check, wrap=False)
        return wload([row, *index[len(isize) :]])

    return Pointwise(inner, (*isize, *wsize[1:]), weight.dtype, weight.device, (ctx.origin,))


@lowering(aten.index_select.default)
def index_select(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode) -> Pointwise:
    """Slices of ``x`` along ``dim`` at the positions in ``index``."""
    require_same_device(x, index)
    size = list(x.get_size())
    if not size:
        raise NotLowerable("index_select of a scalar")
    dim = dim % len(size)
    _checks_every_index(size, "index_select")
    xload, iload, idtype = x.make_loader(), index.make_loader(), index.dtype
    idx_scalar = len(index.get_size()) == 0
    out = list(size)
    out[dim] = sympy.Integer(1) if idx_scalar else index.get_size()[0]
    # Eager's CPU kernel for dim 1 (of 2 or more) raises RuntimeError ("INDICES element is out of
    # DATA bounds"); every other dim raises IndexError.
    check = ctx.index_check("RuntimeError" if dim == 1 else "IndexError", dim)

    def inner(idx: Index) -> Any:
        pos = _indirect(iload([] if idx_scalar else [idx[dim]]), idtype, size[dim], check, wrap=False)
        full = list(idx)
        full[dim] = pos
        return xload(full)

    return Pointwise(inner, tuple(out), x.dtype, x.device, (ctx.origin,))


@lowering(aten.gather.default)
def gather(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode, *, sparse_grad: bool = False) -> Pointwise:
    """``out[i][j] = x[index[i][j]][j]`` (for ``dim=0``), any rank."""
    require_same_device(x, index)
    size = list(x.get_size())
    if not size:
        raise NotLowerable("gather of a scalar")
    dim = dim % len(size)
    xload, iload, idtype = x.make_loader(), index.make_loader(), index.dtype
    check = ctx.index_check("RuntimeError", dim)

    def inner(idx: Index) -> Any:
        pos = _indirect(iload(idx), idtype, size[dim], check, wrap=False)
        full = list(idx)
        full[dim] = pos
        return xload(full)

    return Pointwise(inner, tuple(index.get_size()), x.dtype, x.device, (ctx.origin,))


@lowering(aten.index.Tensor)
def index(ctx: LoweringContext, x: IRNode, indices: Sequence[IRNode | None]) -> Pointwise:
    """Advanced indexing ``x[i0, :, i2]`` with integer index tensors (bool masks fall back)."""
    size = list(x.get_size())
    indices = list(indices) + [None] * (len(size) - len(indices))
    present = [k for k, t in enumerate(indices) if t is not None]
    if not present or any(t.dtype == torch.bool for t in indices if t is not None):  # type: ignore[union-attr]
        raise NotLowerable("boolean or empty index")
    tensors = [indices[k] for k in present]
    require_same_device(x, *tensors)
    bshape = list(broadcast_shapes(*(t.get_size() for t in tensors), hint=ctx.program.hint))  # type: ignore[union-attr]
    adjacent = present == list(range(present[0], present[-1] + 1))
    before = present[0] if adjacent else 0
    rest = [k for k in range(len(size)) if k not in present]
    out: list[sympy.Expr] = []
    if adjacent:
        out = size[:before] + bshape + size[present[-1] + 1 :]
    else:
        out = bshape + [size[k] for k in rest]
    loaders = {k: (expand_loader(indices[k], bshape, ctx.program.hint), indices[k].dtype) for k in present}  # type: ignore[arg-type,union-attr]
    xload = x.make_loader()
    nb = len(bshape)
    # aten._unsafe_index (upsampling's decompositions) promises its indices are in range.
    unsafe = ctx.node is not None and ctx.node.target is aten._unsafe_index.Tensor
    checks = {k: False if unsafe else ctx.index_check("IndexError", k) for k in present}

    def inner(idx: Index) -> Any:
        if adjacent:
            bidx = list(idx[before : before + nb])
            outer = list(idx[:before]) + list(idx[before + nb :])
        else:
            bidx = list(idx[:nb])
            outer = list(idx[nb:])
        full: list[Any] = [None] * len(size)
        for k in present:
            load, dtype = loaders[k]
            full[k] = _indirect(load(bidx), dtype, size[k], checks[k], wrap=True)
        it = iter(outer)
        for k in range(len(size)):
            if full[k] is None:
                full[k] = next(it)
        return xload(full)

    return Pointwise(inner, tuple(out), x.dtype, x.device, (ctx.origin,))


lowering(aten._unsafe_index.Tensor)(index)


def _scatter_into(ctx: LoweringContext, x: IRNode, src: IRNode, inside: Any, src_index: Any) -> Pointwise:
    """``src`` where ``inside(index)`` holds (read at ``src_index(index)``), else ``x``."""
    require_same_device(x, src)
    xload, sload, sdtype = x.make_loader(), src.make_loader(), src.dtype

    def inner(idx: Index) -> Any:
        mask = inside(idx)
        value = ops.masked(mask, lambda: convert(sload(src_index(idx)), x.dtype, sdtype), _zero(x.dtype))
        return ops.where(mask, value, xload(idx))

    return Pointwise(inner, x.get_size(), x.dtype, x.device, (ctx.origin,))


@lowering(aten.slice_scatter.default)
def slice_scatter(ctx: LoweringContext, x: IRNode, src: IRNode, dim: int = 0, start: Any = None, end: Any = None,
                  step: int = 1) -> Pointwise:  # fmt: skip
    """``x`` with ``x[..., start:end:step, ...] = src``."""
    from inductor_ir.lowering.views import _normalize, example_value

    size = x.get_size()
    dim = dim % len(size)
    begin = _normalize(start, size[dim], sympy.Integer(0), example_value(ctx))
    length = src.get_size()[dim]

    def inside(idx: Index) -> Any:
        i = ops.index_expr(idx[dim], torch.int64)
        offset = ops.sub(i, ops.index_expr(begin, torch.int64))
        ok = ops.logical_and(ops.ge(offset, ops.constant(0, torch.int64)),
                             ops.lt(offset, ops.index_expr(length * step, torch.int64)))  # fmt: skip
        if step != 1:
            ok = ops.logical_and(ok, ops.eq(ops.remainder(offset, ops.constant(step, torch.int64)), ops.constant(0, torch.int64)))
        return ok

    def src_index(idx: Index) -> list[Any]:
        shifted = list(idx)
        shifted[dim] = (idx[dim] - begin) if step == 1 else FloorDiv(idx[dim] - begin, step)
        return shifted

    return _scatter_into(ctx, x, src, inside, src_index)


@lowering(aten.select_scatter.default)
def select_scatter(ctx: LoweringContext, x: IRNode, src: IRNode, dim: int, position: int) -> Pointwise:
    """``x`` with ``x[..., position, ...] = src``."""
    size = x.get_size()
    dim = dim % len(size)
    pos = sympy.Integer(position) if position >= 0 else size[dim] + position

    def inside(idx: Index) -> Any:
        return ops.eq(ops.index_expr(idx[dim], torch.int64), ops.index_expr(pos, torch.int64))

    return _scatter_into(ctx, x, src, inside, lambda idx: list(idx[:dim]) + list(idx[dim + 1 :]))
