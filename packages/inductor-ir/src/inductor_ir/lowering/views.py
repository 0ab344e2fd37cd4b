"""Lowerings of view ops as index arithmetic: reshape, permute, expand, slice, select, squeeze, as_strided.

A view of a buffer (or of a strided view of one) that can be described by strides becomes a
``ReinterpretView`` (a new ``Layout`` over the same memory: no copy, and extern calls can take it).
Anything else becomes an ``IndexView`` whose ``reindex`` maps the view's index to the base's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch

from inductor_ir.ir.layout import Layout, contiguous_strides
from inductor_ir.ir.nodes import Buffer, IndexView, IRNode, Pointwise, ReinterpretView
from inductor_ir.lowering.common import stretches
from inductor_ir.lowering.registry import LoweringContext, NotLowerable, lowering
from inductor_ir.symbolic import FloorDiv, ModularIndexing, index_symbol, simplify_index, sympify_int

aten = torch.ops.aten
Index = Sequence[sympy.Expr]


def _strided(x: IRNode) -> tuple[Buffer, Layout] | None:
    """(base buffer, layout) when ``x`` is a buffer or a strided view of one."""
    if isinstance(x, ReinterpretView):
        return x.data, x.layout
    if isinstance(x, Buffer) and not getattr(x, "output_is_tuple", False):
        return x, x.layout
    return None


def _reinterpret(base: Buffer, layout: Layout) -> ReinterpretView:
    return ReinterpretView(base, layout)


def _sizes(values: Sequence[Any]) -> list[sympy.Expr]:
    return [sympify_int(v) for v in values]


@lowering(aten.permute.default)
def permute(ctx: LoweringContext, x: IRNode, dims: Sequence[int]) -> IRNode:
    """Reorder dims."""
    ndim = len(x.get_size())
    dims = [d % ndim for d in dims] if ndim else []
    size = tuple(x.get_size()[d] for d in dims)
    strided = _strided(x)
    if strided is not None:
        base, layout = strided
        return _reinterpret(base, Layout(layout.device, layout.dtype, size, tuple(layout.stride[d] for d in dims), layout.offset))
    inverse = [0] * ndim
    for k, d in enumerate(dims):
        inverse[d] = k
    return IndexView(x, size, lambda index: [index[inverse[j]] for j in range(ndim)])


@lowering(aten.t.default, aten.transpose.int)
def transpose(ctx: LoweringContext, x: IRNode, dim0: int = 0, dim1: int = 1) -> IRNode:
    """Swap two dims (``t`` of a 0/1-d tensor is the identity)."""
    ndim = len(x.get_size())
    if ndim < 2:
        return x
    dims = list(range(ndim))
    dims[dim0 % ndim], dims[dim1 % ndim] = dims[dim1 % ndim], dims[dim0 % ndim]
    return permute(ctx, x, dims)


@lowering(aten.expand.default)
def expand(ctx: LoweringContext, x: IRNode, sizes: Sequence[Any], *, implicit: bool = False) -> IRNode:
    """Broadcast to ``sizes`` (-1 keeps a dim)."""
    old = x.get_size()
    new = _sizes(sizes)
    lead = len(new) - len(old)
    out = [old[k - lead] if (k >= lead and new[k] == -1) else new[k] for k in range(len(new))]
    # A dim broadcasts where its size is 1 (or symbolic and 1 at the example inputs: see
    # `stretches`); sizes that differ only as expressions (`Min(s0, 10)` and `s0`) are equal by guard.
    pinned = [old[j] != out[lead + j] and stretches(old[j], ctx.program.hint) for j in range(len(old))]
    strided = _strided(x)
    if strided is not None:
        base, layout = strided
        stride = [sympy.Integer(0)] * lead + [
            sympy.Integer(0) if pinned[j] else layout.stride[j] for j in range(len(old))
        ]
        return _reinterpret(base, Layout(layout.device, layout.dtype, tuple(out), tuple(stride), layout.offset))
    return IndexView(x, tuple(out), lambda index: [sympy.Integer(0) if pinned[j] else index[lead + j] for j in range(len(old))])


@lowering(aten.unsqueeze.default)
def unsqueeze(ctx: LoweringContext, x: IRNode, dim: int) -> IRNode:
    """Insert a dim of size 1."""
    size = list(x.get_size())
    dim = dim % (len(size) + 1)
    strided = _strided(x)
    if strided is not None:
        base, layout = strided
        stride = list(layout.stride)
        inner = stride[dim] * size[dim] if dim < len(size) else sympy.Integer(1)
        stride.insert(dim, inner)
        size.insert(dim, sympy.Integer(1))
        return _reinterpret(base, Layout(layout.device, layout.dtype, tuple(size), tuple(stride), layout.offset))
    out = size[:dim] + [sympy.Integer(1)] + size[dim:]
    return IndexView(x, tuple(out), lambda index: list(index[:dim]) + list(index[dim + 1 :]))


@lowering(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)
def squeeze(ctx: LoweringContext, x: IRNode, dim: Any = None) -> IRNode:
    """Drop dims of size 1 (all, or those in ``dim``), symbolic ones that are 1 at the example inputs
    included (the trace guarded them to stay 1 when it dropped them: the FX node's rank says so)."""
    size = list(x.get_size())
    if dim is None:
        drop = {k for k, n in enumerate(size) if stretches(n, ctx.program.hint)}
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        drop = {d % len(size) for d in dims if size and stretches(size[d % len(size)], ctx.program.hint)}
    keep = [k for k in range(len(size)) if k not in drop]
    recorded = ctx.node.meta.get("val") if ctx.node is not None else None
    if isinstance(recorded, torch.Tensor) and recorded.dim() != len(keep):
        raise NotLowerable(f"squeeze: the trace kept {recorded.dim()} of {len(size)} dims, sizes {size} say {len(keep)}")
    strided = _strided(x)
    if strided is not None:
        base, layout = strided
        return _reinterpret(
            base,
            Layout(layout.device, layout.dtype, tuple(size[k] for k in keep), tuple(layout.stride[k] for k in keep), layout.offset),
        )

    def reindex(index: Index) -> list[sympy.Expr]:
        full = [sympy.Integer(0)] * len(size)
        for pos, k in enumerate(keep):
            full[k] = index[pos]
        return full

    return IndexView(x, tuple(size[k] for k in keep), reindex)


def example_value(ctx: LoweringContext) -> Callable[[sympy.Expr], int | None]:
    """A size expression's value at the example inputs' sizes (None: it has an unbacked symbol)."""

    def value(expr: sympy.Expr) -> int | None:
        try:
            return ctx.program.hint(expr)
        except (TypeError, ValueError):
            return None

    return value


def _normalize(value: Any, size: sympy.Expr, default: sympy.Expr, hint: Callable[[sympy.Expr], int | None]) -> sympy.Expr:
    """A slice bound as Python clamps it: negative counts from the end, then clipped to ``[0, size]``.

    With a symbolic ``size`` the clipping is decided on the example sizes (`hint`): torch's fake
    slice branched on the same comparisons and guarded them, so every size the graph accepts
    clips the same way (``x[-5:]`` of a size ``s`` guarded ``s < 5`` starts at 0, not ``s - 5``).
    """
    if value is None:
        return default
    v = sympify_int(value)
    if v.is_number and size.is_number:
        n = int(size)
        i = int(v)
        if i < 0:
            i += n
        return sympy.Integer(min(max(i, 0), n))
    if v.is_number and int(v) >= 2**62:
        return size
    if not v.is_number:
        return v
    bound = size + v if int(v) < 0 else v
    at_bound, at_size = hint(bound), hint(size)
    if at_bound is not None and at_bound < 0:
        return sympy.Integer(0)
    if at_bound is not None and at_size is not None and at_bound > at_size:
        return size
    return bound


@lowering(aten.slice.Tensor)
def slice_(ctx: LoweringContext, x: IRNode, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> IRNode:
    """``x[..., start:end:step, ...]`` along ``dim``."""
    size = list(x.get_size())
    dim = dim % len(size)
    hint = example_value(ctx)
    begin = _normalize(start, size[dim], sympy.Integer(0), hint)
    stop = _normalize(end, size[dim], size[dim], hint)
    span = stop - begin
    at_span = hint(span)
    if span.is_number:
        length: sympy.Expr = sympy.Integer(max(0, -(-int(span) // step)))
    elif at_span is not None and at_span < 0:
        # torch's fake slice guarded stop < start (see _normalize). A span empty at the example sizes
        # (stop == start) is not empty at every size the graph accepts: torch guarded only stop >= start
        # (x[..., 2:-2:2] traced at size 4 is empty, at size 5 one long).
        length = sympy.Integer(0)
    else:
        length = span if step == 1 else FloorDiv(span + step - 1, step)
    out = size[:dim] + [length] + size[dim + 1 :]
    strided = _strided(x)
    if strided is not None:
        base, layout = strided
        stride = list(layout.stride)
        offset = layout.offset + begin * stride[dim]
        stride[dim] = stride[dim] * step
        return _reinterpret(base, Layout(layout.device, layout.dtype, tuple(out), tuple(stride), offset))
    return IndexView(x, tuple(out), lambda index: [index[k] * step + begin if k == dim else index[k] for k in range(len(size))])


@lowering(aten.select.int)
def select(ctx: LoweringContext, x: IRNode, dim: int, index: Any) -> IRNode:
    """``x[..., index, ...]`` along ``dim`` (the dim disappears)."""
    size = list(x.get_size())
    dim = dim % len(size)
    i = sympify_int(index)
    if i.is_number and int(i) < 0:
        i = size[dim] + i
    strided = _strided(x)
    out = size[:dim] + size[dim + 1 :]
    if strided is not None:
        base, layout = strided
        stride = list(layout.stride)
        offset = layout.offset + i * stride[dim]
        del stride[dim]
        return _reinterpret(base, Layout(layout.device, layout.dtype, tuple(out), tuple(stride), offset))
    return IndexView(x, tuple(out), lambda idx: list(idx[:dim]) + [i] + list(idx[dim:]))


_VIEW_OPS = (aten.view.default, aten._unsafe_view.default, aten.reshape.default)


def _infer_shape(shape: Sequence[Any], numel: sympy.Expr, recorded: Any = None) -> list[sympy.Expr]:
    sizes = _sizes(shape)
    if any(s == -1 for s in sizes):
        if isinstance(recorded, torch.Tensor) and recorded.dim() == len(sizes):
            # FX knows the inferred size as an integer expression (FloorDiv(s0, 2)); numel / known
            # would be a fraction (s0/2) when symbolic.
            return _sizes(recorded.shape)
        known = sympy.Mul(*[s for s in sizes if s != -1])
        inferred = sympy.simplify(numel / known)
        if sympy.fraction(sympy.together(inferred))[1] != 1:
            inferred = FloorDiv(numel, known)
        sizes = [inferred if s == -1 else s for s in sizes]
    return sizes


def reshape_index(old: Sequence[sympy.Expr], new: Sequence[sympy.Expr]) -> Any:
    """``reindex`` from an index of shape ``new`` to the same element of shape ``old`` (row-major)."""

    cache: dict[tuple[sympy.Expr, ...], list[sympy.Expr]] = {}

    def reindex(index: Index) -> list[sympy.Expr]:
        key = tuple(index)
        if key not in cache:
            cache[key] = compute(index)
        return cache[key]

    def compute(index: Index) -> list[sympy.Expr]:
        flat = sum((i * s for i, s in zip(index, contiguous_strides(new))), sympy.Integer(0))
        flat = simplify_index(flat, list(zip(index, new)))  # type: ignore[arg-type]
        out = []
        for k, stride in enumerate(contiguous_strides(old)):
            if old[k] == 1:
                out.append(sympy.Integer(0))
            elif k == 0:
                out.append(FloorDiv(flat, stride))
            else:
                out.append(ModularIndexing(flat, stride, old[k]))
        return [simplify_index(e, list(zip(index, new))) for e in out]  # type: ignore[arg-type]

    return reindex


def _recorded_view_value(ctx: LoweringContext, shape: Sequence[Any]) -> Any:
    """The FX-recorded result of the view node being lowered, when ``shape`` is that node's own."""
    node = ctx.node
    if node is None or node.target not in _VIEW_OPS or len(node.args) < 2:
        return None
    recorded_shape = node.args[1]
    if not isinstance(recorded_shape, (list, tuple)) or len(recorded_shape) != len(shape):
        return None
    return ctx.meta()


@lowering(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(ctx: LoweringContext, x: IRNode, shape: Sequence[Any]) -> IRNode:
    """Reshape: a new layout when the input is contiguous, else index arithmetic."""
    old = x.get_size()
    numel = sympy.Mul(*old) if old else sympy.Integer(1)
    new = _infer_shape(shape, numel, _recorded_view_value(ctx, shape))
    strided = _strided(x)
    if strided is not None:
        base, layout = strided
        if Layout(layout.device, layout.dtype, layout.size, layout.stride).is_contiguous():
            return _reinterpret(base, Layout(layout.device, layout.dtype, tuple(new), contiguous_strides(new), layout.offset))
        stride = view_strides(layout.size, layout.stride, new)
        if stride is not None:
            return _reinterpret(base, Layout(layout.device, layout.dtype, tuple(new), stride, layout.offset))
    reindex = reshape_index(old, new)
    if strided is None and _divides_by_symbols(reindex, len(new)):
        # Index arithmetic by symbolic sizes that does not simplify away nests into every later view
        # of the value and grows with each (poolformer's norm and pooling views at a new image size:
        # index expressions of 10,000 operations, minutes of simplification per load). Stored
        # contiguous, the value views as a new layout instead.
        stored = ctx.realize(x, contiguous_strides(old))
        layout = stored.layout
        if isinstance(stored, Buffer) and Layout(layout.device, layout.dtype, layout.size, layout.stride).is_contiguous():
            return _reinterpret(stored, Layout(layout.device, layout.dtype, tuple(new), contiguous_strides(new), layout.offset))
    return IndexView(x, tuple(new), reindex)


def _divides_by_symbols(reindex: Callable[[Sequence[sympy.Expr]], Sequence[sympy.Expr]], ndim: int) -> bool:
    """Whether ``reindex`` of plain index variables still divides, or takes a remainder, by a
    symbolic size."""
    for expr in reindex([index_symbol("i", k) for k in range(ndim)]):
        for node in sympy.preorder_traversal(expr):
            if isinstance(node, FloorDiv) and node.args[1].free_symbols:
                return True
            if isinstance(node, ModularIndexing) and (node.args[1].free_symbols or node.args[2].free_symbols):
                return True
    return False


def view_strides(size: Sequence[sympy.Expr], stride: Sequence[sympy.Expr], new: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...] | None:
    """Strides that show memory laid out as ``(size, stride)`` in the shape ``new`` without a copy, or
    None when no strides can (static sizes only).

    Runs of dims that are contiguous with each other (``stride[k] == stride[k + 1] * size[k + 1]``)
    may be split and merged freely; the new dims must cover each run exactly. A transposed
    attention output ``(B, H, S, D)`` with strides ``(S*H*D, D, H*D, 1)`` therefore views as
    ``(B, H, S, D)`` again, and its transpose ``(B, S, H, D)`` as ``(B*S, H*D)``, with no copy.
    """
    if not all(isinstance(v, sympy.Integer) for v in (*size, *stride, *new)):
        return None
    if any(int(n) == 0 for n in size):
        return None
    runs: list[tuple[int, int]] = []  # (elements, stride of the innermost dim), outermost first
    for n, st in zip(size, stride):
        if int(n) == 1:
            continue
        if runs and runs[-1][1] == int(st) * int(n):
            runs[-1] = (runs[-1][0] * int(n), int(st))
        else:
            runs.append((int(n), int(st)))
    out: list[int] = [1] * len(new)
    k = len(new) - 1
    for elements, inner in reversed(runs):
        covered = 1
        while covered < elements:
            if k < 0:
                return None
            out[k] = inner * covered
            covered *= int(new[k])
            k -= 1
        if covered != elements:
            return None
    if any(int(new[j]) != 1 for j in range(k + 1)):
        return None
    return tuple(sympy.Integer(v) for v in out)


@lowering(aten.as_strided.default)
def as_strided(ctx: LoweringContext, x: IRNode, size: Sequence[Any], stride: Sequence[Any], storage_offset: Any = None) -> IRNode:
    """A view with explicit size and strides over ``x``'s memory (a copy of ``x`` when it is not stored).

    Its elements depend on where ``x``'s elements lie in memory: an ``x`` that eager holds in a
    storage of its own (a flip of a transposed tensor keeps the transposed strides) is read from a
    copy stored with eager's strides, whatever layout the buffer computing it was given."""
    x = with_eager_storage(ctx, x)
    strided = _strided(x)
    if strided is None:
        buf = ctx.realize_buffer(x)
        base, layout = buf, buf.layout
    else:
        base, layout = strided
    from inductor_ir.ir.nodes import InputBuffer

    if storage_offset is not None and isinstance(base, InputBuffer):
        raise NotLowerable("as_strided with a storage offset on a graph input")
    offset = layout.offset if storage_offset is None else sympify_int(storage_offset)
    return _reinterpret(base, Layout(layout.device, layout.dtype, tuple(_sizes(size)), tuple(_sizes(stride)), offset))


def with_eager_storage(ctx: LoweringContext, x: IRNode) -> IRNode:
    """``x`` stored as eager stores it, for an op whose result depends on where elements lie in
    memory (``as_strided``, ``as_strided_scatter``, lowered or run as ATen): where eager holds ``x``
    in a storage of its own, a copy with eager's strides unless its buffer already has them."""
    recorded = _recorded_input(ctx)
    if recorded is None or _matches(_strided(x), recorded):
        return x
    own = _own_storage_strides(recorded)
    if own is None:
        return x
    copy = Pointwise(x.make_loader(), x.get_size(), x.dtype, x.device, (ctx.origin,))
    return ctx.realize(copy, own)


def _recorded_input(ctx: LoweringContext) -> torch.Tensor | None:
    """The value FX recorded for the first argument of the node being lowered."""
    node = ctx.node
    arg = node.args[0] if node is not None and node.args else None
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _matches(strided: tuple[Buffer, Layout] | None, recorded: torch.Tensor) -> bool:
    """Whether a stored value is laid out as eager laid it out: a graph input as it came, or a
    buffer with eager's strides at offset 0 of its own storage."""
    from inductor_ir.ir.nodes import InputBuffer

    if strided is None:
        return False
    base, layout = strided
    if isinstance(base, InputBuffer):
        return True
    same_strides = [sympy.sympify(a) for a in layout.stride] == [sympy.sympify(int(b)) for b in recorded.stride()]
    return same_strides and sympy.sympify(layout.offset) == 0 and _own_storage_strides(recorded) is not None


def is_dense(size: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """Whether the strides lay the elements out without gaps or overlap (some permutation of dims)."""
    expected = 1
    for step, n in sorted((st, n) for n, st in zip(size, stride) if n != 1):
        if step != expected:
            return False
        expected *= n
    return True


def _own_storage_strides(recorded: torch.Tensor) -> tuple[sympy.Expr, ...] | None:
    """``recorded``'s strides when it fills a storage of its own (offset 0, no gaps, no overlap)."""
    try:
        if recorded.storage_offset() != 0 or not is_dense(tuple(map(int, recorded.shape)), tuple(map(int, recorded.stride()))):
            return None
        if recorded.untyped_storage().nbytes() != recorded.numel() * recorded.element_size():
            return None
        return tuple(sympy.Integer(int(v)) for v in recorded.stride())
    except (RuntimeError, TypeError, NotImplementedError):  # symbolic sizes or a storage fake tensors lack
        return None


@lowering(aten.split.Tensor, aten.split_with_sizes.default)
def split(ctx: LoweringContext, x: IRNode, split_size: Any, dim: int = 0) -> list[IRNode]:
    """Slices of ``x`` along ``dim``."""
    size = x.get_size()
    dim = dim % len(size)
    total = size[dim]
    if isinstance(split_size, (list, tuple)):
        lengths = _sizes(split_size)
    else:
        step = sympify_int(split_size)
        if not (total.is_number and step.is_number):
            raise NotLowerable("symbolic split")
        lengths = [sympy.Integer(min(int(step), int(total) - k)) for k in range(0, max(int(total), 1), max(int(step), 1))]
    pieces, start = [], sympy.Integer(0)
    for length in lengths:
        pieces.append(slice_(ctx, x, dim, start, start + length))
        start = start + length
    return pieces


@lowering(aten.unbind.int)
def unbind(ctx: LoweringContext, x: IRNode, dim: int = 0) -> list[IRNode]:
    """Every index along ``dim`` as a separate view."""
    n = x.get_size()[dim]
    if not n.is_number:
        raise NotLowerable("symbolic unbind")
    return [select(ctx, x, dim, k) for k in range(int(n))]
