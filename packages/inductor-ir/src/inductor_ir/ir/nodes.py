"""The define-by-run IR: loop bodies as Python functions over SymPy indices, buffers with layouts.

A tensor value during lowering is one of

* ``Pointwise(inner_fn, ranges)``: ``inner_fn(index)`` computes one element by calling ``ops.*``;
  not stored anywhere until realized, so consumers inline it;
* a buffer: ``InputBuffer`` (a graph input or constant), ``ComputedBuffer`` (a realized
  ``Pointwise`` or ``Reduction``), ``ExternKernel`` / ``FallbackKernel`` (an ATen call) or
  ``MultiOutput`` (one tensor of an ATen call returning several);
* a view, which is index arithmetic: ``ReinterpretView`` (a strided layout over a buffer) or
  ``IndexView`` (any index mapping over any value).

Every value answers ``dtype``, ``device``, ``get_size()`` and ``make_loader()``; the loader maps an
index (SymPy expressions, one per dim) to the element via ``ops`` calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sympy
import torch

from inductor_ir.ir.layout import Layout
from inductor_ir.ops_handler import ops

if TYPE_CHECKING:
    from inductor_ir.ir.tracing import ReadsWrites

__all__ = [
    "Buffer",
    "ComputedBuffer",
    "ExternKernel",
    "FallbackKernel",
    "IRNode",
    "IndexView",
    "InputBuffer",
    "Loader",
    "MultiOutput",
    "Pointwise",
    "Reduction",
    "ReinterpretView",
]

Loader = Callable[[Sequence[sympy.Expr]], Any]
Index = Sequence[sympy.Expr]


class IRNode:
    """Base of every IR value: dtype, device, size and a loader."""

    __slots__ = ()

    dtype: torch.dtype
    device: str

    def get_size(self) -> tuple[sympy.Expr, ...]:
        """The value's shape, as SymPy expressions."""
        raise NotImplementedError

    def make_loader(self) -> Loader:
        """A function from an index to the element, by ``ops`` calls."""
        raise NotImplementedError


@dataclass(slots=True, eq=False)
class Pointwise(IRNode):
    """An elementwise computation over ``ranges``: ``inner_fn(index) -> value`` calls ``ops.*``."""

    inner_fn: Loader
    ranges: tuple[sympy.Expr, ...]
    dtype: torch.dtype
    device: str
    origins: tuple[str, ...] = ()

    def get_size(self) -> tuple[sympy.Expr, ...]:
        """The iteration space."""
        return self.ranges

    def make_loader(self) -> Loader:
        """The inner function itself (consumers inline it)."""
        return self.inner_fn


@dataclass(slots=True, eq=False)
class Reduction(IRNode):
    """``reduction_type`` of ``inner_fn(index, reduction_index)`` over ``reduction_ranges``, per index of ``ranges``.

    ``output_index``: for a reduction with several results (``welford_reduce`` gives
    ``(mean, m2, weight)``), which result this node stores. Sibling nodes of one Welford reduction
    share ``inner_fn`` and differ only in ``output_index``; a code generator that runs them in one
    loop computes the reduction once (``ops.reduction`` on equal values gives the same tuple).
    """

    inner_fn: Callable[[Index, Index], Any]
    ranges: tuple[sympy.Expr, ...]
    reduction_ranges: tuple[sympy.Expr, ...]
    reduction_type: str
    dtype: torch.dtype
    src_dtype: torch.dtype
    device: str
    origins: tuple[str, ...] = ()
    output_index: int | None = None

    def get_size(self) -> tuple[sympy.Expr, ...]:
        """The shape of the result (the pointwise ranges)."""
        return self.ranges

    def make_loader(self) -> Loader:
        """Reductions are realized before use."""
        raise TypeError("a Reduction must be realized into a ComputedBuffer before it is loaded")


class Buffer(IRNode):
    """A named, allocated tensor with a :class:`Layout`."""

    __slots__ = ()

    name: str
    layout: Layout

    @property
    def dtype(self) -> torch.dtype:  # type: ignore[override]
        """The layout's dtype."""
        return self.layout.dtype

    @property
    def device(self) -> str:  # type: ignore[override]
        """The layout's device."""
        return self.layout.device

    def get_size(self) -> tuple[sympy.Expr, ...]:
        """The layout's size."""
        return self.layout.size

    def make_loader(self) -> Loader:
        """``ops.load(name, layout.index(index))``."""
        name, layout = self.name, self.layout

        def load(index: Index) -> Any:
            return ops.load(name, layout.index(index))

        return load

    def read_names(self) -> tuple[str, ...]:
        """Names of the buffers this one reads while being computed."""
        return ()


@dataclass(slots=True, eq=False)
class InputBuffer(Buffer):
    """A graph input (``kind='input'``, by position) or a constant tensor (``kind='constant'``)."""

    name: str
    layout: Layout
    kind: str = "input"


@dataclass(slots=True, eq=False)
class ComputedBuffer(Buffer):
    """A realized ``Pointwise`` or ``Reduction``: one scheduler node, one kernel store."""

    name: str
    layout: Layout
    data: Pointwise | Reduction
    reads: tuple[str, ...] = ()
    # The loads of one element of ``data`` over the index symbols ``i0..``/``r0..`` (set by the
    # lowering, which traced it anyway): the scheduler renames them instead of running the body again.
    traced: ReadsWrites | None = None

    @property
    def is_reduction(self) -> bool:
        """Whether ``data`` is a reduction."""
        return isinstance(self.data, Reduction)

    def read_names(self) -> tuple[str, ...]:
        """Buffers the body loads (filled in by dependency analysis at realization)."""
        return self.reads

    def store_pointwise(self, index: Index) -> None:
        """Compute one element of a pointwise buffer and store it (calls ``ops``)."""
        assert isinstance(self.data, Pointwise)
        ops.store(self.name, self.layout.index(index), self.data.inner_fn(index))

    def store_reduction(self, index: Index, reduction_index: Index) -> None:
        """Reduce one output element (calls ``ops.reduction`` then ``ops.store_reduction``)."""
        data = self.data
        assert isinstance(data, Reduction)
        value = ops.reduction(data.dtype, data.src_dtype, data.reduction_type, data.inner_fn(index, reduction_index))
        if data.output_index is not None and isinstance(value, tuple):
            # One result of a tuple-valued reduction (welford_reduce). Handlers that compute no
            # values (index probes) may return one placeholder instead; it is stored as is.
            value = value[data.output_index]
        ops.store_reduction(self.name, self.layout.index(index), value)


@dataclass(slots=True, eq=False)
class ExternKernel(Buffer):
    """An ATen call the wrapper makes directly (mm, addmm, bmm, convolution, ...).

    ``args``/``kwargs`` are the op's arguments with every tensor replaced by a ``Buffer`` or
    ``ReinterpretView``; ``layout`` is the layout of the (first) result.
    """

    name: str
    layout: Layout
    op: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    output_is_tuple: bool = False

    def read_names(self) -> tuple[str, ...]:
        """Buffers among the arguments."""
        names: list[str] = []

        def visit(value: Any) -> None:
            if isinstance(value, ReinterpretView):
                names.append(value.data.name)
            elif isinstance(value, Buffer):
                names.append(value.name)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    visit(item)

        visit(self.args)
        visit(list(self.kwargs.values()))
        return tuple(dict.fromkeys(names))


@dataclass(slots=True, eq=False)
class FallbackKernel(ExternKernel):
    """Any ATen op without a lowering, run as itself by the wrapper (a table miss is never an error)."""

    name: str
    layout: Layout
    op: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    output_is_tuple: bool = False


@dataclass(slots=True, eq=False)
class MultiOutput(Buffer):
    """Output ``path`` (indices into nested tuples) of a multi-output ``FallbackKernel``."""

    name: str
    layout: Layout
    parent: str
    path: tuple[int, ...]

    def read_names(self) -> tuple[str, ...]:
        """The parent kernel's result."""
        return (self.parent,)


@dataclass(slots=True, eq=False)
class ReinterpretView(IRNode):
    """A strided view of a buffer: loads ``data.name`` at ``layout.index(index)``; no copy."""

    data: Buffer
    layout: Layout

    @property
    def dtype(self) -> torch.dtype:  # type: ignore[override]
        """The viewed buffer's dtype."""
        return self.layout.dtype

    @property
    def device(self) -> str:  # type: ignore[override]
        """The viewed buffer's device."""
        return self.layout.device

    def get_size(self) -> tuple[sympy.Expr, ...]:
        """The view's size."""
        return self.layout.size

    def make_loader(self) -> Loader:
        """``ops.load(base, layout.index(index))``."""
        name, layout = self.data.name, self.layout

        def load(index: Index) -> Any:
            return ops.load(name, layout.index(index))

        return load


@dataclass(slots=True, eq=False)
class IndexView(IRNode):
    """Any view as index arithmetic: element ``index`` of the view is ``data[reindex(index)]``."""

    data: IRNode
    size: tuple[sympy.Expr, ...]
    reindex: Callable[[Index], Sequence[sympy.Expr]]

    @property
    def dtype(self) -> torch.dtype:  # type: ignore[override]
        """The base's dtype."""
        return self.data.dtype

    @property
    def device(self) -> str:  # type: ignore[override]
        """The base's device."""
        return self.data.device

    def get_size(self) -> tuple[sympy.Expr, ...]:
        """The view's size."""
        return self.size

    def make_loader(self) -> Loader:
        """The base's loader after ``reindex``."""
        inner, reindex = self.data.make_loader(), self.reindex

        def load(index: Index) -> Any:
            return inner(reindex(index))

        return load
