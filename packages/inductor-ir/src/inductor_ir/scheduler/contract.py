"""The rules a kernel group promises its backend (docs/kernel-backend.md), checked on a built group.

A code generator trusts these rules without checking them: a load of a buffer the group writes is
taken from the register holding the stored value, a reduction's result is read after its loop, an
input an output takes over in place is read before it is overwritten. A scheduler change that breaks
one compiles to a kernel reading a stale or uninitialized value, a silently wrong answer. `Schedule.check`
(on under `InductorIRConfig.check_ir`, in every package's tests) runs `check_group` on each group.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from inductor_ir.backend import KernelGroup, KernelNode
from inductor_ir.ir.tracing import trace_body

__all__ = ["check_group"]


@dataclass(frozen=True)
class _Traced:
    node: KernelNode
    position: int
    reads: tuple[tuple[str, sympy.Expr], ...]
    store: sympy.Expr | None


def _trace(group: KernelGroup) -> list[_Traced]:
    xs, rs = group.make_index_vars()
    traced = []
    for position, node in enumerate(group.nodes):
        trace = trace_body(node.body, xs, rs if node.in_reduction_loop else ())
        writes = [dep.index for dep in trace.deps.writes if dep.name == node.name]
        reads = tuple((dep.name, dep.index) for dep in trace.deps.reads)
        traced.append(_Traced(node, position, reads, writes[0] if writes else None))
    return traced


def check_group(group: KernelGroup, reloads_stored_rows: bool = False) -> None:
    """Raise ``AssertionError`` naming the first rule of the backend contract ``group`` breaks.

    ``reloads_stored_rows``: the group's backend lets a later loop read a row an earlier loop stored.
    """
    where = f"kernel {group.name}"
    order = [(n.loop, not n.in_reduction_loop) for n in group.nodes]
    assert order == sorted(order), f"{where}: nodes are not in (loop, in loop first) order"
    traced = _trace(group)
    written = {t.node.name: t for t in traced}
    internal = {r.name for r in group.internal}
    outputs = {r.name for r in group.outputs}
    in_place = {p.output: p.input.name for p in group.in_place}
    for t in traced:
        for name, index in t.reads:
            producer = written.get(name)
            if producer is None:
                continue
            what = f"{where}: {t.node.name} reads {name}"
            assert producer.position < t.position, f"{what}, which is written after it"
            if producer.node.kind == "reduction":
                after = t.node.loop > producer.node.loop or (
                    t.node.loop == producer.node.loop and not t.node.in_reduction_loop
                )
                assert after, f"{what}, a reduction's result, before that reduction's loop has finished"
                continue
            assert index == producer.store, f"{what} at {index}, not where it is stored ({producer.store})"
            if not producer.node.in_reduction_loop:
                continue
            if t.node.loop == producer.node.loop:
                assert t.node.in_reduction_loop, f"{what}, a value of loop {producer.node.loop}, after that loop"
                continue
            assert reloads_stored_rows, f"{what}, a value of loop {producer.node.loop}, in loop {t.node.loop}"
            assert t.node.in_reduction_loop and t.node.loop > producer.node.loop, f"{what} outside a later loop"
            assert name in outputs and name not in internal, f"{what} from an earlier loop, but {name} is not stored"
            assert name not in in_place, f"{what} from an earlier loop, but {name} is written over an input in place"
    for output, source in in_place.items():
        store = written[output]
        for t in traced:
            for name, index in t.reads:
                if name != source:
                    continue
                assert index == store.store, f"{where}: {source}, taken over by {output}, is read at another index"
                assert t.position <= store.position, f"{where}: {source} is read after {output} overwrote it"
