"""Lowerings of writes at data-dependent positions: scatter, scatter_add, scatter_reduce, index_put,
index_add, index_reduce, put, masked_scatter.

Each is lowered as a *gather over the sources*: every output element reduces over all source
positions, keeping those whose index equals its own position::

    scatter_add(x, dim, index, src)[p] = x[p] + sum_j where(index[p; dim=j] == p[dim], src[p; dim=j], 0)

A ``Reduction`` (sum, prod, max, min over the matching sources; mean as sum and count) followed by a
pointwise combine with the destination; a sum or product that includes the destination starts its
reduction from it, as eager's kernels add the sources into it one by one (``x + 1e30 - 1e30`` is
0). Plain ``scatter``, ``put`` and ``index_put`` without ``accumulate`` reduce the *last* matching
source position with ``max`` and then load that source, so duplicates resolve as eager CPU does (the
last write wins). A boolean mask's k-th set element takes
``values[k]``: its rank is a sum reduction over the mask. The result is deterministic on every
backend (no atomics, the same order of additions in every run), fuses like any reduction, and needs
no mutation in the IR. Index values are checked as eager checks them (``ops.indirect_indexing`` with
an ``IndexCheck``, see ``ir/checks.py``): an out-of-range one fails instead of matching nothing.

The cost is ``numel(out) * numel(sources)`` element comparisons, so only ops with a static number of
sources where that product is at most ``DENSE_SCATTER_LIMIT`` are lowered; larger ones (an embedding
gradient over a big vocabulary) raise ``NotLowerable`` and run as ATen fallbacks, as do several
boolean masks in one ``index_put``, ``mean`` of integers, and reductions of bool values. A larger
``index_put`` runs as ATen's ``index_put_`` writing into a copy of ``x`` that a generated kernel makes
(``accumulate.py``), so the copy fuses into whatever computes ``x``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import sympy
import torch

from inductor_ir.ir.checks import IndexCheck
from inductor_ir.ir.nodes import IRNode, Pointwise, Reduction
from inductor_ir.lowering.accumulate import index_put_into_copy
from inductor_ir.lowering.common import (
    broadcast_shapes,
    compute_dtype_for,
    const,
    convert,
    expand_loader,
    require_same_device,
)
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.ops_handler import ops
from inductor_ir.symbolic import FloorDiv, ModularIndexing

__all__ = ["DENSE_SCATTER_LIMIT"]

aten = torch.ops.aten
Index = Sequence[sympy.Expr]

DENSE_SCATTER_LIMIT = 1 << 22
"""Largest ``numel(out) * numel(sources)`` lowered as a dense gather; larger ops fall back to ATen."""

# How a reduced value of matching sources combines with the destination element.
_REDUCTIONS = {"sum": "sum", "add": "sum", "prod": "prod", "multiply": "prod", "amax": "max", "amin": "min", "mean": "mean"}


def _numel(sizes: Sequence[sympy.Expr]) -> sympy.Expr:
    return sympy.Mul(*sizes) if sizes else sympy.Integer(1)


def _check_cost(ctx: LoweringContext, out: Sequence[sympy.Expr], sources: Sequence[sympy.Expr]) -> None:
    """Raise ``NotLowerable`` unless the dense form is cheap: a static number of sources and a
    bounded cost at the example sizes (with symbolic sizes the cost then grows only linearly), and an
    output with elements: a dense form over none would check no index, where eager's kernels check
    them as they write (and raise, some even with nothing to write into): eager's kernel runs instead."""
    if any(sympy.sympify(s) == 0 for s in out):
        raise NotLowerable("scatter into a tensor with no elements: eager's own index checks")
    if not _numel(sources).is_number:
        raise NotLowerable("scatter over a symbolic number of sources (the dense form would grow quadratically)")
    try:
        cost = ctx.program.hint(_numel(out) * _numel(sources))
    except (TypeError, ValueError):
        raise NotLowerable("scatter with sizes of unknown magnitude") from None
    if cost > DENSE_SCATTER_LIMIT:
        raise NotLowerable(f"scatter of {cost} comparisons exceeds DENSE_SCATTER_LIMIT ({DENSE_SCATTER_LIMIT})")


def _position(value: Any, dtype: torch.dtype, size: sympy.Expr, wrap: bool, check: IndexCheck | bool = False) -> Any:
    """An index value as int64, negative values wrapped by ``size`` when ``wrap``; with ``check``, one
    outside ``[0, size)`` (after wrapping) fails as in eager (an out-of-range source would otherwise
    match no position and be dropped silently)."""
    value = convert(value, torch.int64, dtype)
    if check:
        return ops.index_expr(ops.indirect_indexing(value, size, check=check, wrap_neg=wrap), torch.int64)
    if not wrap:
        return value
    negative = ops.lt(value, ops.constant(0, torch.int64))
    return ops.where(negative, ops.add(value, ops.index_expr(size, torch.int64)), value)


def _identity(kind: str, dtype: torch.dtype) -> bool | int | float:
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if dtype.is_floating_point:
        return float("-inf") if kind == "max" else float("inf")
    info = torch.iinfo(dtype)
    return info.min if kind == "max" else info.max


Match = Callable[[Index, Index], Any]  # (output index, source index) -> bool value, or None (always)
Source = Callable[[Index, Index], Any]  # (output index, source index) -> the source value


def _combine(
    ctx: LoweringContext,
    x: IRNode,
    sources: Sequence[sympy.Expr],
    match: Match,
    source: Source,
    kind: str,
    include_self: bool = True,
    alpha: Any = None,
    guard_source: bool = False,
) -> Pointwise:
    """``x`` combined (``kind``: sum, prod, max, min, mean) with the reduction of its matching sources.

    ``guard_source``: read the source only where it matches (it may be smaller than ``x``).
    ``include_self=False``: elements some source reaches start from the sources alone.
    """
    size, dtype = x.get_size(), x.dtype
    if dtype == torch.bool or (kind == "mean" and not dtype.is_floating_point):
        raise NotLowerable(f"{kind} scatter of {dtype} values")
    _check_cost(ctx, size, sources)
    acc = compute_dtype_for(dtype)
    mean = kind == "mean"
    kind = "sum" if mean else kind
    identity = _identity(kind, acc)

    def inner(index: Index, rindex: Index) -> Any:
        hit = match(index, rindex)
        if guard_source:
            value = ops.masked(hit, lambda: convert(source(index, rindex), acc, dtype), identity)
        else:
            value = convert(source(index, rindex), acc, dtype)
        if alpha is not None:
            value = ops.mul(value, const(alpha, acc))
        return ops.where(hit, value, ops.constant(identity, acc))

    x_load = x.make_loader()
    if include_self and not mean and kind in ("sum", "prod"):
        return _combine_from_self(ctx, x, sources, inner, kind, acc)
    reduced = ctx.realize(Reduction(inner, tuple(size), tuple(sources), kind, acc, acc, x.device, (ctx.origin,)))
    count = None
    if not include_self or mean:
        count = ctx.realize(_match_count(ctx, x, sources, match))
    reduced_load = reduced.make_loader()
    count_load = count.make_loader() if count is not None else None
    combine = {"sum": ops.add, "prod": ops.mul, "max": ops.maximum, "min": ops.minimum}[kind]

    def out(index: Index) -> Any:
        mine = convert(x_load(index), acc, dtype)
        theirs = reduced_load(index)
        if count_load is None:
            return convert(combine(mine, theirs), dtype, acc)
        hits = count_load(index)
        written = ops.gt(hits, ops.constant(0, torch.int64))
        if mean:
            if include_self:
                theirs = ops.add(theirs, mine)
                hits = ops.add(hits, ops.constant(1, torch.int64))
            divisor = ops.to_dtype(ops.maximum(hits, ops.constant(1, torch.int64)), acc, torch.int64)
            theirs = ops.truediv(theirs, divisor)
        elif include_self:
            return convert(combine(mine, theirs), dtype, acc)
        return convert(ops.where(written, theirs, mine), dtype, acc)

    return Pointwise(out, tuple(size), dtype, x.device, (ctx.origin,))


def _combine_from_self(
    ctx: LoweringContext,
    x: IRNode,
    sources: Sequence[sympy.Expr],
    inner: Callable[[Index, Index], Any],
    kind: str,
    acc: torch.dtype,
) -> Pointwise:
    """``x`` summed (or multiplied) with its matching sources in eager's order: one reduction over
    ``1 + numel(sources)`` positions that starts from ``x`` itself, then the sources in row-major order.

    Eager's kernels add the sources into ``x`` one after another; adding their sum to ``x`` at the
    end rounds differently, and where sources cancel (``-1e30 + ... + 1e30``) it keeps an ``x`` that
    eager's first addition absorbed.
    """
    x_load, dtype = x.make_loader(), x.dtype

    def from_self(index: Index, rindex: Index) -> Any:
        position = rindex[0]
        first = ops.eq(ops.index_expr(position, torch.int64), ops.constant(0, torch.int64))
        later = ops.logical_not(first)
        theirs = ops.masked(later, lambda: inner(index, _delinearize(position - 1, sources)), _identity(kind, acc))
        return ops.where(first, convert(x_load(index), acc, dtype), theirs)

    positions = (_numel(sources) + 1,)
    reduced = ctx.realize(Reduction(from_self, tuple(x.get_size()), positions, kind, acc, acc, x.device, (ctx.origin,)))
    reduced_load = reduced.make_loader()
    return Pointwise(lambda index: convert(reduced_load(index), dtype, acc), tuple(x.get_size()), dtype, x.device, (ctx.origin,))


def _match_count(ctx: LoweringContext, x: IRNode, sources: Sequence[sympy.Expr], match: Match) -> Reduction:
    def inner(index: Index, rindex: Index) -> Any:
        one, zero = ops.constant(1, torch.int64), ops.constant(0, torch.int64)
        return ops.where(match(index, rindex), one, zero)

    return Reduction(inner, tuple(x.get_size()), tuple(sources), "sum", torch.int64, torch.int64, x.device, (ctx.origin,))


def _last_write(
    ctx: LoweringContext,
    x: IRNode,
    sources: Sequence[sympy.Expr],
    match: Match,
    source: Source,
) -> Pointwise:
    """``x`` where no source matches, else the source at the last matching position (row-major)."""
    size = x.get_size()
    _check_cost(ctx, size, sources)
    strides = [sympy.Mul(*sources[k + 1 :]) for k in range(len(sources))]

    def last(index: Index, rindex: Index) -> Any:
        linear = ops.index_expr(sympy.Add(*[r * s for r, s in zip(rindex, strides)]), torch.int64)
        return ops.where(match(index, rindex), linear, ops.constant(-1, torch.int64))

    found = ctx.realize(Reduction(last, tuple(size), tuple(sources), "max", torch.int64, torch.int64, x.device, (ctx.origin,)))
    found_load, x_load = found.make_loader(), x.make_loader()
    total = _numel(sources)

    def out(index: Index) -> Any:
        position = found_load(index)
        hit = ops.ge(position, ops.constant(0, torch.int64))

        def picked() -> Any:
            flat = ops.indirect_indexing(position, total, check=False)
            return source(index, _delinearize(flat, sources))

        return ops.where(hit, ops.masked(hit, picked, _zero(x.dtype)), x_load(index))

    return Pointwise(out, tuple(size), x.dtype, x.device, (ctx.origin,))


def _delinearize(linear: sympy.Expr, sizes: Sequence[sympy.Expr]) -> list[sympy.Expr]:
    """The row-major multi-index over ``sizes`` of linear position ``linear``."""
    if len(sizes) <= 1:
        return [linear] if sizes else []
    strides = [_numel(sizes[k + 1 :]) for k in range(len(sizes))]
    return [FloorDiv(linear, strides[0])] + [ModularIndexing(linear, s, n) for s, n in zip(strides[1:], sizes[1:])]


def _zero(dtype: torch.dtype) -> bool | int | float:
    return False if dtype == torch.bool else (0.0 if dtype.is_floating_point else 0)


# -- scatter along a dim ------------------------------------------------------------------------


def _along_dim(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode) -> tuple[int, list[sympy.Expr], Match]:
    """(dim, sources, match) for ``scatter``-style ops: sources run over ``index.size(dim)``.

    ``index`` may be smaller than ``x`` in the other dims: positions beyond it match nothing.
    A 0-d ``x`` takes a 0-d ``index`` (one source, position 0). Index values must lie in
    ``[0, x.size(dim))`` (eager raises RuntimeError otherwise; no wrapping of negative ones).
    """
    size, isize = x.get_size(), index.get_size()
    if len(isize) != len(size) or index.dtype == torch.bool:
        raise NotLowerable("scatter by an index of another rank")
    iload, idtype = index.make_loader(), index.dtype
    if not size:
        zero, check0 = sympy.Integer(0), ctx.index_check("RuntimeError", 0)
        return 0, [sympy.Integer(1)], lambda out, rindex: ops.eq(
            _position(iload([]), idtype, sympy.Integer(1), False, check0), ops.index_expr(zero, torch.int64)
        )
    dim = dim % len(size)
    check = ctx.index_check("RuntimeError", dim)
    narrower = [k for k in range(len(size)) if k != dim and isize[k] != size[k]]

    def match(out: Index, rindex: Index) -> Any:
        at = list(out)
        at[dim] = rindex[0]
        if not narrower:
            return ops.eq(_position(iload(at), idtype, size[dim], False, check), ops.index_expr(out[dim], torch.int64))
        inside = None
        for k in narrower:
            ok = ops.lt(ops.index_expr(out[k], torch.int64), ops.index_expr(isize[k], torch.int64))
            inside = ok if inside is None else ops.logical_and(inside, ok)
        value = ops.masked(inside, lambda: _position(iload(at), idtype, size[dim], False, check), -1)
        return ops.eq(value, ops.index_expr(out[dim], torch.int64))

    return dim, [isize[dim]], match


def _smaller(src: Any, x: IRNode, dim: int) -> bool:
    """Whether ``src`` is smaller than ``x`` in a dim other than ``dim`` (reads need a guard)."""
    if not isinstance(src, IRNode):
        return False
    return any(k != dim and a != b for k, (a, b) in enumerate(zip(src.get_size(), x.get_size())))


def _source_along(src: IRNode, dim: int) -> Source:
    load, scalar = src.make_loader(), not src.get_size()

    def source(out: Index, rindex: Index) -> Any:
        if scalar:
            return load([])
        at = list(out)
        at[dim] = rindex[0]
        return load(at)

    return source


def _scalar_source(value: Any, dtype: torch.dtype) -> Source:
    return lambda out, rindex: const(value, dtype)


@lowering(aten.scatter.src, aten.scatter.value)
def scatter(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode, src: Any) -> Pointwise:
    """``x`` with ``x[p; dim=index[q]] = src[q]`` (duplicates: the last source wins, as on CPU)."""
    dim, sources, match = _along_dim(ctx, x, dim, index)
    if isinstance(src, IRNode):
        require_same_device(x, index, src)
        source = lambda out, rindex: convert(_source_along(src, dim)(out, rindex), x.dtype, src.dtype)  # noqa: E731
    else:
        source = _scalar_source(src, x.dtype)
    return _last_write(ctx, x, sources, match, source)


@lowering(aten.scatter_add.default)
def scatter_add(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode, src: IRNode) -> Pointwise:
    """``x`` plus every ``src[q]`` at ``x[p; dim=index[q]]``."""
    require_same_device(x, index, src)
    dim, sources, match = _along_dim(ctx, x, dim, index)
    return _combine(ctx, x, sources, match, _source_along(src, dim), "sum", guard_source=_smaller(src, x, dim))


@lowering(aten.scatter_reduce.two, aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_reduce(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode, src: Any, reduce: str,
                   *, include_self: bool = True) -> Pointwise:  # fmt: skip
    """``scatter_reduce`` with sum/prod/amax/amin (and the legacy ``scatter(reduce='add'|'multiply')``)."""
    kind = _REDUCTIONS.get(reduce)
    if kind is None:
        raise NotLowerable(f"scatter_reduce {reduce!r}")
    dim, sources, match = _along_dim(ctx, x, dim, index)
    if isinstance(src, IRNode):
        require_same_device(x, index, src)
        load = _source_along(src, dim)
        source = lambda out, rindex: convert(load(out, rindex), x.dtype, src.dtype)  # noqa: E731
    else:
        source = _scalar_source(src, x.dtype)
    return _combine(ctx, x, sources, match, source, kind, include_self=include_self, guard_source=_smaller(src, x, dim))


def _along_vector(
    x: IRNode, dim: int, index: IRNode, check: Callable[[int], IndexCheck]
) -> tuple[int, Match, Callable[[IRNode], Source]]:
    """(dim, match, source loader) for ``index_add``-style ops: ``index`` is a vector (or 0-d) whose
    values must lie in ``[0, x.size(dim))``: eager wraps no negative ones, it fails as ``check(dim)``."""
    size, isize = x.get_size(), index.get_size()
    if len(isize) > 1 or index.dtype == torch.bool:
        raise NotLowerable("index_add/index_reduce by a non-vector index")
    dim = dim % len(size) if size else 0
    iload, idtype = index.make_loader(), index.dtype
    extent = size[dim] if size else sympy.Integer(1)
    failure = check(dim)

    def match(out: Index, rindex: Index) -> Any:
        position = _position(iload(list(rindex[: len(isize)])), idtype, extent, False, failure)
        return ops.eq(position, ops.index_expr(out[dim] if size else sympy.Integer(0), torch.int64))

    def loader(source: IRNode) -> Source:
        load, scalar = source.make_loader(), not source.get_size()

        def value(out: Index, rindex: Index) -> Any:
            if scalar:
                return convert(load([]), x.dtype, source.dtype)
            at = list(out)
            at[dim] = rindex[0]
            return convert(load(at), x.dtype, source.dtype)

        return value

    return dim, match, loader


@lowering(aten.index_add.default)
def index_add(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode, source: IRNode, *, alpha: Any = 1) -> Pointwise:
    """``x`` plus ``alpha * source[..., j, ...]`` at ``x[..., index[j], ...]``."""
    require_same_device(x, index, source)
    # Eager raises RuntimeError from its index_put path (2+ dims, int64 index, alpha 1), else IndexError.
    fast = len(x.get_size()) > 1 and index.dtype == torch.int64 and alpha == 1
    error: Literal["IndexError", "RuntimeError"] = "RuntimeError" if fast else "IndexError"
    dim, match, loader = _along_vector(x, dim, index, lambda d: ctx.index_check(error, d))
    sources = list(index.get_size()) or [sympy.Integer(1)]
    return _combine(ctx, x, sources, match, loader(source), "sum", alpha=None if alpha == 1 else alpha)


@lowering(aten.index_reduce.default)
def index_reduce(ctx: LoweringContext, x: IRNode, dim: int, index: IRNode, source: IRNode, reduce: str,
                 *, include_self: bool = True) -> Pointwise:  # fmt: skip
    """``index_reduce`` with prod, mean, amax or amin."""
    kind = _REDUCTIONS.get(reduce)
    if kind is None:
        raise NotLowerable(f"index_reduce {reduce!r}")
    require_same_device(x, index, source)
    dim, match, loader = _along_vector(x, dim, index, lambda d: ctx.index_check("IndexError", d))
    sources = list(index.get_size()) or [sympy.Integer(1)]
    return _combine(ctx, x, sources, match, loader(source), kind, include_self=include_self)


@lowering(aten.put.default)
def put(ctx: LoweringContext, x: IRNode, index: IRNode, source: IRNode, accumulate: bool = False) -> Pointwise:
    """``x`` as a flat tensor with ``flat[index[k]] = source[k]`` (``accumulate``: ``+=``)."""
    isize, ssize = list(index.get_size()), list(source.get_size())
    if index.dtype == torch.bool:
        raise NotLowerable("put with a boolean index")
    require_same_device(x, index, source)
    size = x.get_size()
    total = _numel(size)
    strides = [_numel(size[k + 1 :]) for k in range(len(size))]
    iload, idtype, sload = index.make_loader(), index.dtype, source.make_loader()
    sources = isize or [sympy.Integer(1)]
    check = ctx.index_check("IndexError")

    def match(out: Index, rindex: Index) -> Any:
        linear = sympy.Add(*[i * s for i, s in zip(out, strides)]) if size else sympy.Integer(0)
        position = _position(iload(list(rindex[: len(isize)])), idtype, total, True, check)
        return ops.eq(position, ops.index_expr(linear, torch.int64))

    istrides = [_numel(isize[k + 1 :]) for k in range(len(isize))]

    def value(out: Index, rindex: Index) -> Any:
        if ssize == isize:
            at = list(rindex[: len(isize)])
        else:  # same number of elements, another shape: the k-th in row-major order
            linear = sympy.Add(*[r * s for r, s in zip(rindex, istrides)]) if isize else sympy.Integer(0)
            at = _delinearize(linear, ssize)
        return convert(sload(at), x.dtype, source.dtype)

    if accumulate:
        return _combine(ctx, x, sources, match, value, "sum")
    return _last_write(ctx, x, sources, match, value)


# -- index_put ----------------------------------------------------------------------------------


@lowering(aten.index_put.default, aten._unsafe_index_put.default)
def index_put(ctx: LoweringContext, x: IRNode, indices: Sequence[IRNode | None], values: IRNode,
              accumulate: bool = False) -> IRNode:  # fmt: skip
    """``x[indices] = values`` (``accumulate``: ``+=``, duplicates all add up): the dense form, or
    where it does not apply (too many sources), ATen's ``index_put_`` on a fresh copy of ``x``."""
    try:
        return _index_put(ctx, x, indices, values, accumulate)
    except NotLowerable:
        return index_put_into_copy(ctx, x, indices, values, accumulate)


def _index_put(ctx: LoweringContext, x: IRNode, indices: Sequence[IRNode | None], values: IRNode,
               accumulate: bool) -> Pointwise:  # fmt: skip
    """The dense form of ``index_put``, integer indices or one boolean mask."""
    size = list(x.get_size())
    indices = list(indices) + [None] * (len(size) - len(indices))
    present = [k for k, t in enumerate(indices) if t is not None]
    tensors = [indices[k] for k in present]
    if len(present) == 1 and tensors[0].dtype in (torch.bool, torch.uint8):  # type: ignore[union-attr]
        return _index_put_mask(ctx, x, present[0], tensors[0], values, accumulate)  # type: ignore[arg-type]
    if not present or len(indices) > len(size) or any(t.dtype in (torch.bool, torch.uint8) for t in tensors):  # type: ignore[union-attr]
        raise NotLowerable("index_put with several boolean masks or no index")
    require_same_device(x, values, *tensors)
    bshape = list(broadcast_shapes(*(t.get_size() for t in tensors), hint=ctx.program.hint))  # type: ignore[union-attr]
    adjacent = present == list(range(present[0], present[-1] + 1))
    before = present[0] if adjacent else 0
    rest = [k for k in range(len(size)) if k not in present]
    if adjacent:
        result_shape = size[:before] + bshape + size[present[-1] + 1 :]
    else:
        result_shape = bshape + [size[k] for k in rest]
    loaders = {k: (expand_loader(indices[k], bshape, ctx.program.hint), indices[k].dtype) for k in present}  # type: ignore[arg-type,union-attr]
    vload, vdtype = expand_loader(values, result_shape, ctx.program.hint), values.dtype
    unsafe = ctx.node is not None and ctx.node.target is aten._unsafe_index_put.default
    checks = {k: False if unsafe else ctx.index_check("IndexError", k) for k in present}
    if not bshape:
        bshape_sources: list[sympy.Expr] = [sympy.Integer(1)]  # 0-d indices: one source
    else:
        bshape_sources = bshape

    def bindex(rindex: Index) -> list[sympy.Expr]:
        return list(rindex) if bshape else []

    def match(out: Index, rindex: Index) -> Any:
        result = None
        for k in present:
            load, dtype = loaders[k]
            ok = ops.eq(_position(load(bindex(rindex)), dtype, size[k], True, checks[k]), ops.index_expr(out[k], torch.int64))
            result = ok if result is None else ops.logical_and(result, ok)
        return result

    def source(out: Index, rindex: Index) -> Any:
        outer = [out[k] for k in rest]
        at = outer[:before] + bindex(rindex) + outer[before:] if adjacent else bindex(rindex) + outer
        return convert(vload(at), x.dtype, vdtype)

    if accumulate:
        return _combine(ctx, x, bshape_sources, match, source, "sum")
    return _last_write(ctx, x, bshape_sources, match, source)


def _index_put_mask(ctx: LoweringContext, x: IRNode, at: int, mask: IRNode, values: IRNode, accumulate: bool) -> Pointwise:
    """``x[..., mask, ...] = values``: the k-th set element of ``mask`` (row-major) takes ``values[k]``.

    When ``values`` varies along the masked dim, each element's rank among the set ones is a
    reduction over the mask (``numel(mask) ** 2`` comparisons); otherwise it is a ``where``.
    """
    size, msize = list(x.get_size()), list(mask.get_size())
    span = len(msize)
    if size[at : at + span] != msize:
        raise NotLowerable("index_put with a mask shaped unlike the dims it covers")
    require_same_device(x, mask, values)
    vsize = values.get_size()
    offset = at + 1 + len(size) - at - span - len(vsize)  # values align right with the result shape
    if offset < 0:
        raise NotLowerable("index_put values of too many dims")
    mload, mdtype = mask.make_loader(), mask.dtype
    vload, vdtype, xload = values.make_loader(), values.dtype, x.make_loader()
    ranked = 0 <= at - offset < len(vsize) and vsize[at - offset] != 1
    rank_load = _rank_of_set(ctx, mload, mdtype, msize, x.device) if ranked else None

    def out(index: Index) -> Any:
        covered = list(index[at : at + span])
        selected = convert(mload(covered), torch.bool, mdtype)

        def value() -> Any:
            result = list(index[:at]) + [sympy.Integer(0)] + list(index[at + span :])
            if rank_load is not None:
                result[at] = ops.indirect_indexing(rank_load(covered), vsize[at - offset], check=False)
            position = [sympy.Integer(0) if vsize[j] == 1 else result[j + offset] for j in range(len(vsize))]
            return convert(vload(position), x.dtype, vdtype)

        new = ops.masked(selected, value, _zero(x.dtype))
        old = xload(index)
        if accumulate:
            new = ops.logical_or(old, new) if x.dtype == torch.bool else ops.add(old, new)
        return ops.where(selected, new, old)

    return Pointwise(out, tuple(size), x.dtype, x.device, (ctx.origin,))


def _rank_of_set(ctx: LoweringContext, mload: Any, mdtype: torch.dtype, msize: Sequence[sympy.Expr], device: str) -> Any:
    """A loader of each position's count of set mask elements before it (row-major): a sum reduction."""
    _check_cost(ctx, msize, msize)
    strides = [_numel(msize[k + 1 :]) for k in range(len(msize))]

    def before(index: Index, rindex: Index) -> Any:
        earlier = ops.lt(ops.index_expr(sympy.Add(*[r * s for r, s in zip(rindex, strides)]), torch.int64),
                         ops.index_expr(sympy.Add(*[i * s for i, s in zip(index, strides)]), torch.int64))  # fmt: skip
        hit = ops.logical_and(earlier, convert(mload(list(rindex)), torch.bool, mdtype))
        return ops.where(hit, ops.constant(1, torch.int64), ops.constant(0, torch.int64))

    reduction = Reduction(before, tuple(msize), tuple(msize), "sum", torch.int64, torch.int64, device, (ctx.origin,))
    return ctx.realize(reduction).make_loader()


@lowering(aten.masked_scatter.default)
def masked_scatter(ctx: LoweringContext, x: IRNode, mask: IRNode, source: IRNode) -> Pointwise:
    """``x`` whose k-th set position of ``mask`` (both broadcast, row-major) takes ``source.flatten()[k]``."""
    require_same_device(x, mask, source)
    size = list(broadcast_shapes(x.get_size(), mask.get_size(), hint=ctx.program.hint))  # self broadcasts too (out of place)
    if not size:
        raise NotLowerable("masked_scatter of a scalar")
    mload, mdtype = expand_loader(mask, size, ctx.program.hint), mask.dtype
    rank = _rank_of_set(ctx, mload, mdtype, size, x.device)
    sload, sdtype, xload = source.make_loader(), source.dtype, expand_loader(x, size, ctx.program.hint)
    ssize = list(source.get_size())
    total = _numel(ssize)

    def out(index: Index) -> Any:
        selected = convert(mload(index), torch.bool, mdtype)

        def value() -> Any:
            flat = ops.indirect_indexing(rank(index), total, check=False)
            return convert(sload(_delinearize(flat, ssize)), x.dtype, sdtype)

        return ops.where(selected, ops.masked(selected, value, _zero(x.dtype)), xload(index))

    return Pointwise(out, tuple(size), x.dtype, x.device, (ctx.origin,))
