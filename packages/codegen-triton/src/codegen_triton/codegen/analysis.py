"""Looking at a group before writing it: which buffers it touches at which indices, and the kernel plan."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sympy

from codegen_triton.codegen.kernel import KernelPlan
from inductor_ir.backend import KernelGroup
from inductor_ir.ops_handler import set_ops_handler

__all__ = [
    "Access",
    "choose_plan",
    "contiguous_dim_last",
    "reads_reduction_contiguously",
    "record_accesses",
    "reduction_hint",
]

_INT32_MAX = 2**31 - 1
_MAX_TILED_Y = 65535 * 16


@dataclass(frozen=True)
class Access:
    """One load or store of a group's node: buffer name, SymPy index, whether it writes."""

    name: str
    index: sympy.Expr
    is_store: bool


class _AccessRecorder:
    """An ops handler that records loads and stores and computes nothing."""

    def __init__(self) -> None:
        self.accesses: list[Access] = []
        self._counter = 0

    def load(self, name: str, index: sympy.Expr) -> None:
        self.accesses.append(Access(name, sympy.sympify(index), False))

    def store(self, name: str, index: sympy.Expr, value: Any, mode: str | None = None) -> None:
        self.accesses.append(Access(name, sympy.sympify(index), True))

    def store_reduction(self, name: str, index: sympy.Expr, value: Any) -> None:
        self.accesses.append(Access(name, sympy.sympify(index), True))

    def indirect_indexing(
        self, x: Any, size: sympy.Expr, check: object = True, wrap_neg: bool = True
    ) -> sympy.Symbol:
        self._counter += 1
        return sympy.Symbol(f"indirect{self._counter}", integer=True)

    def masked(self, mask: Any, body: Callable[[], Any], other: Any) -> Any:
        return body()

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


def record_accesses(group: KernelGroup) -> list[Access]:
    """Every load and store of the group's nodes, over the group's default index variables."""
    xs, rs = group.make_index_vars()
    recorder = _AccessRecorder()
    with set_ops_handler(recorder):
        for node in group.nodes:
            node.body(xs, rs if node.in_reduction_loop else ())
    return recorder.accesses


def _tile_split(group: KernelGroup, accesses: list[Access]) -> int:
    """How many leading live dims go to the y axis of a tiled kernel (0: do not tile)."""
    xs, _ = group.make_index_vars()
    live = [var for var, size in zip(xs, group.pointwise_size) if size != 1]
    if len(live) < 2:
        return 0
    last = live[-1]
    internal = {record.name for record in group.internal}
    for access in accesses:
        if access.name in internal:
            continue
        expanded = sympy.expand(access.index)
        coeff_last = expanded.coeff(last)
        if coeff_last == 0 or coeff_last == 1:
            continue
        for position in range(len(live) - 2, -1, -1):
            if expanded.coeff(live[position]) == 1:
                return position + 1
    return 0


def contiguous_dim_last(group: KernelGroup) -> KernelGroup:
    """``group`` with its pointwise dims reordered so that the dim every access walks contiguously is last.

    A pointwise kernel over ``(N, C, H, W)`` whose buffers are all channels-last (max pooling after a
    channels-last convolution) walks memory with stride ``C`` along ``xindex``; with ``C`` last, it
    walks contiguously. Groups with a reduction, or where some access is already contiguous in the
    last dim, are returned unchanged.
    """
    if group.is_reduction or len(group.pointwise_size) < 2:
        return group
    xs, _ = group.make_index_vars()
    live = [k for k, size in enumerate(group.pointwise_size) if size != 1]
    if len(live) < 2:
        return group
    internal = {record.name for record in group.internal}
    indices = [sympy.expand(a.index) for a in record_accesses(group) if a.name not in internal]
    if not indices or any(index.coeff(xs[live[-1]]) == 1 for index in indices):
        return group
    for k in reversed(live[:-1]):
        if all(index.coeff(xs[k]) == 1 for index in indices):
            order = [j for j in range(len(xs)) if j != k] + [k]
            return _permuted(group, order)
    return group


def _permuted(group: KernelGroup, order: list[int]) -> KernelGroup:
    """``group`` iterating its pointwise dims in ``order`` (new dim ``j`` is old dim ``order[j]``)."""

    def reorder(body: Any) -> Any:
        def run(xs: Any, rs: Any) -> None:
            old = [sympy.Integer(0)] * len(order)
            for new_position, old_position in enumerate(order):
                old[old_position] = xs[new_position]
            body(old, rs)

        return run

    nodes = tuple(dataclasses.replace(node, body=reorder(node.body)) for node in group.nodes)
    sizes = tuple(group.pointwise_size[k] for k in order)
    return dataclasses.replace(group, pointwise_size=sizes, nodes=nodes)


def reduction_hint(group: KernelGroup) -> str:
    """How a reduction group's loads walk memory: "inner", "outer" or "".

    Among the loads that move with the reduction, "inner" when at least as many are contiguous along
    the innermost reduction dim (row sums, BatchNorm statistics of NCHW maps) as along the innermost
    pointwise dim, "outer" when more are contiguous along the pointwise dim (column sums, statistics
    of channels-last maps, a layer-norm weight gradient that also reads each row's mean), "" when
    neither (gathers, broadcasts). Loads that do not move with the reduction are loaded once.
    """
    xs, rs = group.make_index_vars()
    live_r = [var for var, size in zip(rs, group.reduction_size) if size != 1]
    live_x = [var for var, size in zip(xs, group.pointwise_size) if size != 1]
    if not live_r:
        return ""
    internal = {record.name for record in group.internal}
    inner = outer = 0
    for access in record_accesses(group):
        if access.is_store or access.name in internal:
            continue
        index = sympy.expand(access.index)
        if not any(index.coeff(var) != 0 for var in live_r):
            continue
        if index.coeff(live_r[-1]) == 1:
            inner += 1
        elif live_x and index.coeff(live_x[-1]) == 1:
            outer += 1
    if inner and inner >= outer:
        return "inner"
    return "outer" if outer else ""


def reads_reduction_contiguously(group: KernelGroup) -> bool:
    """Whether some load walks the reduction's innermost dim contiguously (split reductions size their
    programs by it)."""
    _, rs = group.make_index_vars()
    live = [var for var, size in zip(rs, group.reduction_size) if size != 1]
    if not live:
        return False
    internal = {record.name for record in group.internal}
    return any(
        sympy.expand(a.index).coeff(live[-1]) == 1
        for a in record_accesses(group)
        if not a.is_store and a.name not in internal
    )


def _static(expr: sympy.Expr) -> int | None:
    return int(expr) if isinstance(expr, sympy.Integer) else None


def choose_plan(
    group: KernelGroup, *, persistent_limit: int, tile_2d: bool, force_int64: bool = False
) -> KernelPlan:
    """The kernel kind for a group: pointwise or tiled, persistent or looped reduction; index width."""
    sizes = [*group.pointwise_size, *group.reduction_size]
    numels = [sympy.Mul(*sizes)] + [record.numel() for record in group.buffers().values()]
    use_int64 = force_int64 or any((_static(n) or 0) > _INT32_MAX for n in numels)
    if group.is_reduction:
        rnumel = _static(sympy.Mul(*group.reduction_size))
        kind = "persistent" if rnumel is not None and rnumel <= persistent_limit else "looped"
        return KernelPlan(kind, use_int64=use_int64, hint=reduction_hint(group))
    split = _tile_split(group, record_accesses(group)) if tile_2d else 0
    if split:
        ynumel = _static(sympy.Mul(*[s for s in group.pointwise_size if s != 1][:split]))
        if ynumel is None or ynumel > _MAX_TILED_Y:
            split = 0  # the y axis of the grid holds at most 65535 programs
    if split:
        return KernelPlan("tiled", tile_split=split, use_int64=use_int64)
    return KernelPlan("pointwise", use_int64=use_int64)
