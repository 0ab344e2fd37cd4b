"""The lowering registry and the context every lowering receives.

A lowering turns one ATen op applied to IR values into an IR value. It is registered beside its
definition::

    @lowering(aten.sin)
    def sin(ctx: LoweringContext, x: IRNode) -> IRNode: ...

A lowering may raise :class:`NotLowerable` for an argument combination it does not handle; the op
then runs as a ``FallbackKernel``, exactly like an op with no lowering at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import sympy
import torch

from inductor_ir.ir.checks import IndexCheck, user_location
from inductor_ir.ir.layout import Layout, contiguous_strides
from inductor_ir.ir.nodes import (
    Buffer,
    ComputedBuffer,
    IndexView,
    IRNode,
    Pointwise,
    Reduction,
    ReinterpretView,
)
from inductor_ir.ir.program import Program
from inductor_ir.ir.tracing import ReadsWrites, trace_body
from inductor_ir.symbolic import index_symbol

__all__ = [
    "LOWERINGS",
    "Lowering",
    "LoweringContext",
    "NotLowerable",
    "lowering",
]

Lowering = Callable[..., Any]

LOWERINGS: dict[Any, Lowering] = {}
"""ATen ``OpOverload`` -> lowering function."""
_LoweringT = TypeVar("_LoweringT", bound=Lowering)



DECOMPOSED_INDEX_ERRORS: dict[str, Literal["IndexError", "RuntimeError"]] = {
    "aten.nll_loss_forward.default": "IndexError",
    "aten.nll_loss2d_forward.default": "IndexError",
}
"""Ops that decompose into indexing ops (`gather`) whose eager kernels raise another exception for an
index out of range than the indexing op would: a loss target out of range is an IndexError in eager,
a gather index a RuntimeError."""

class NotLowerable(Exception):
    """Raised by a lowering for arguments it does not handle: the op falls back to ATen."""


def lowering(*targets: Any) -> Callable[[_LoweringT], _LoweringT]:
    """Register the decorated function as the lowering of each target.

    A target is an ``OpOverload`` (``aten.add.Tensor``) or an ``OpOverloadPacket`` (``aten.add``:
    every overload of it).
    """

    def register(fn: _LoweringT) -> _LoweringT:
        for target in targets:
            if isinstance(target, torch._ops.OpOverloadPacket):
                for overload_name in target.overloads():
                    LOWERINGS[getattr(target, overload_name)] = fn
            else:
                LOWERINGS[target] = fn
        return fn

    return register


def _origins_of(value: Any) -> tuple[str, ...]:
    """The op names of the computation a view wraps (through a few views), for kernel names."""
    for _ in range(4):
        origins = getattr(value, "origins", None)
        if origins:
            return tuple(origins)
        value = getattr(value, "data", None)
        if value is None or isinstance(value, Buffer):
            break
    return ()


def _numel(size: Sequence[sympy.Expr]) -> sympy.Expr:
    return sympy.Mul(*size) if size else sympy.Integer(1)


def channels_last_strides(size: Sequence[sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """Strides of an ``(N, C, H, W)`` tensor stored as ``(N, H, W, C)``."""
    n, c, h, w = size
    del n
    one = sympy.Integer(1)
    return (h * w * c, one, w * c, c)


@dataclass
class LoweringContext:
    """What a lowering may use: the program being built and the FX node being lowered."""

    program: Program
    node: torch.fx.Node | None = None
    inline_op_limit: int = 24
    inline_read_limit: int = 4
    # A computed operand at least this many times smaller than the CPU result it is broadcast over is
    # stored first (`broadcast_operand`), when the result has at least `precompute_min_numel` elements.
    precompute_ratio: int = 16
    precompute_min_numel: int = 16384
    max_inline_depth: int = 48
    _counter: itertools.count[int] = field(default_factory=itertools.count)
    _realized: dict[int, Buffer] = field(default_factory=dict)
    inline_depth: dict[int, int] = field(default_factory=dict)
    # Layout optimization for convolution graphs (set by `lower`): 4-D buffers are stored
    # channels-last, so cuDNN / oneDNN run their NHWC kernels without converting layouts around each conv.
    channels_last: bool = False
    # In such a graph, the nodes returned only as values saved for the backward graph: stored in
    # the graph's own layout (the backward is compiled for it), not the recorded one.
    saved_outputs: frozenset[torch.fx.Node] = frozenset()

    # -- names and buffers ---------------------------------------------------------------------
    def new_name(self) -> str:
        """A fresh buffer name ``bufN``."""
        return f"buf{next(self._counter)}"

    def register(self, buffer: Buffer) -> Buffer:
        """Append a buffer to the program (in execution order)."""
        self.program.buffers.append(buffer)
        return buffer

    @property
    def origin(self) -> str:
        """The short name of the ATen op being lowered (``sin``), for kernel names."""
        if self.node is None:
            return "op"
        target = self.node.target
        name = getattr(target, "__name__", str(target))
        return name.split(".")[0]

    def index_check(self, error: Literal["IndexError", "RuntimeError"], dim: int | None = None) -> IndexCheck:
        """How generated code checks this op's indirect indices: eager's ``error``, the op, the user's line.

        An op decomposed from another (``nll_loss_forward`` into ``gather``) raises what the original op
        raises in eager (`DECOMPOSED_INDEX_ERRORS`), and names it."""
        op = "" if self.node is None else str(self.node.target)
        original = "" if self.node is None else str(self.node.meta.get("original_aten") or "")
        if original in DECOMPOSED_INDEX_ERRORS:
            error, op = DECOMPOSED_INDEX_ERRORS[original], original
        return IndexCheck(error, op, dim, user_location(self.node))

    def meta(self) -> Any:
        """``node.meta['val']`` of the node being lowered (a fake tensor, a tuple, a SymInt) or None."""
        return None if self.node is None else self.node.meta.get("val")

    def out_dtype(self, default: torch.dtype) -> torch.dtype:
        """The dtype FX recorded for the node's result, else ``default``."""
        val = self.meta()
        return val.dtype if isinstance(val, torch.Tensor) else default

    # -- realization ---------------------------------------------------------------------------
    def realize(self, value: IRNode, stride: Sequence[sympy.Expr] | None = None) -> Buffer | ReinterpretView:
        """Store ``value`` in a buffer unless it already is one (memoized per value)."""
        if isinstance(value, (Buffer, ReinterpretView)):
            return value
        key = id(value)
        if key in self._realized:
            return self._realized[key]
        size = value.get_size()
        if stride is not None:
            strides = tuple(stride)
        elif self.channels_last and len(size) == 4:
            strides = channels_last_strides(size)
        else:
            strides = contiguous_strides(size)
        layout = Layout(value.device, value.dtype, tuple(size), strides)
        data: Pointwise | Reduction
        if isinstance(value, (Pointwise, Reduction)):
            data = value
        else:
            data = Pointwise(value.make_loader(), tuple(size), value.dtype, value.device, _origins_of(value) or (self.origin,))
        buffer = ComputedBuffer(self.new_name(), layout, data)
        buffer.traced = self.body_deps(data)
        buffer.reads = buffer.traced.read_names()
        self.register(buffer)
        self._realized[key] = buffer
        # Keep the value alive so its id is not reused by another object.
        self._keepalive.append(value)
        return buffer

    def stored(self, value: Any) -> Any:
        """``value`` as it is stored, when it was realized since it was made: later users then load
        the buffer (one read) instead of recomputing the value's whole inlined body. Views over a
        realized value become views over its buffer. Anything else is returned unchanged."""
        if isinstance(value, IRNode) and not isinstance(value, (Buffer, ReinterpretView)):
            found = self._realized.get(id(value))
            if found is not None:
                return found
            if isinstance(value, IndexView):
                data = self.stored(value.data)
                if data is not value.data:
                    return IndexView(data, value.size, value.reindex)
        return value

    def realize_buffer(self, value: IRNode) -> Buffer:
        """Like :meth:`realize` but always a plain buffer (views are copied)."""
        result = self.realize(value)
        if isinstance(result, ReinterpretView):
            return self.realize(Pointwise(result.make_loader(), result.get_size(), result.dtype, result.device))  # type: ignore[return-value]
        return result

    def broadcast_operand(self, value: IRNode, out_size: Sequence[sympy.Expr]) -> IRNode:
        """``value``, stored first when it is a computed CPU operand much smaller than ``out_size``.

        An inlined operand is recomputed for every element of the result: a batch norm's
        ``rsqrt(var + eps) * weight`` over (C,) runs a square root and a division per element of the
        (N, C, H, W) result, and in a channels-last loop (channels innermost) no compiler can hoist it.
        Stored, it is computed C times and the result's loop loads one value. Only where that is worth a
        kernel: at least `precompute_ratio` times fewer elements, a result of at least
        `precompute_min_numel` elements, and a body reading several buffers or running several ops.
        The values are the same (an inlined value is rounded to its dtype as a stored one is). Not on
        GPUs: there a pointwise kernel is bound by memory, not by its arithmetic, and a launch costs more.
        """
        base = value
        while isinstance(base, IndexView):
            base = base.data
        if not isinstance(base, Pointwise) or not str(base.device).startswith("cpu"):
            return value
        hint = self.program.hint
        try:
            small, large = hint(_numel(base.get_size())), hint(_numel(out_size))
        except (TypeError, ValueError):
            return value
        if large < self.precompute_min_numel or small * self.precompute_ratio > large:
            return value
        deps = self.body_deps(base)
        if len(deps.read_names()) < 2 and deps.op_count - len(deps.reads) < 3:
            return value  # one buffer read and at most two other ops (`w * 2`): nothing to save
        self.realize(base)
        stored: IRNode = self.stored(value)
        return stored

    def op_count(self, value: Pointwise) -> int:
        """How many ops one element of ``value`` runs (its inlined body)."""
        return self.body_deps(value).op_count

    def should_inline(self, value: IRNode) -> bool:
        """Whether a pointwise value with several users is cheap enough to recompute in each: at most
        ``inline_op_limit`` ops, at most ``inline_read_limit`` buffers read, and no gathers (an
        embedding lookup feeding a residual stream would otherwise be redone by every layer norm
        downstream, each one re-reading the table through the indices)."""
        if not isinstance(value, Pointwise):
            return True
        deps = self.body_deps(value)
        if deps.op_count > self.inline_op_limit or len(deps.read_names()) > self.inline_read_limit:
            return False
        return not any(str(s).startswith("indirect") for dep in deps.reads for s in dep.index.free_symbols)

    def body_deps(self, value: Pointwise | Reduction) -> ReadsWrites:
        """Loads, index symbols and op count of one element of ``value`` (traced once per value:
        ``should_inline`` and ``realize`` both ask about a value that is about to be stored)."""
        found = self._deps.get(id(value))
        if found is not None and found[0] is value:
            return found[1]
        index = [index_symbol("i", k) for k in range(len(value.ranges))]
        if isinstance(value, Reduction):
            rindex = [index_symbol("r", k) for k in range(len(value.reduction_ranges))]
            deps = trace_body(value.inner_fn, index, rindex, text=False).deps
        else:
            deps = trace_body(value.inner_fn, index, text=False).deps
        # The value is kept with its entry, so its id cannot be reused by another object.
        self._deps[id(value)] = (value, deps)
        return deps

    def __post_init__(self) -> None:
        self._keepalive: list[IRNode] = []
        self._deps: dict[int, tuple[Pointwise | Reduction, ReadsWrites]] = {}
