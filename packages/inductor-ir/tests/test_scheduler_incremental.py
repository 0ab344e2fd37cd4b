"""Compile-time caches and incremental structures give the same answers as computing from scratch.

Each cache below would go stale silently if it were wrong (a fusion decision, an input order or an
index would change): these tests recompute everything the slow way and compare.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import sympy
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir import ops, set_ops_handler
from inductor_ir.backend import KernelBackend, KernelGroup
from inductor_ir.ir.layout import Layout
from inductor_ir.ir.nodes import InputBuffer
from inductor_ir.ir.program import Program
from inductor_ir.scheduler import fusion, groups
from inductor_ir.scheduler.group_edges import GroupEdges
from inductor_ir.scheduler.groups import Group, SchedulerNode


def _label_group(name: str, order: int, reads: set[str]) -> Group:
    buffer = InputBuffer(name, Layout.contiguous("cpu", torch.float32, (sympy.Integer(4),)))
    return Group([SchedulerNode(buffer, order, frozenset(reads))])


def _random_dag(rng: random.Random, count: int) -> dict[int, Group]:
    live = {}
    for k in range(count):
        reads = {f"b{j}" for j in rng.sample(range(k), min(k, rng.randrange(4)))} | {"graph_input"}
        live[k] = _label_group(f"b{k}", k, reads)
    return live


def _reaches_brute_force(consumers: Mapping[int, set[int]], src: int, dst: int) -> bool:
    """Paths src -> x -> ... -> dst with x != dst, by breadth-first search over all groups."""
    frontier = {n for n in consumers[src] if n != dst}
    seen = set(frontier)
    while frontier:
        if dst in frontier:
            return True
        frontier = {m for n in frontier for m in consumers[n]} - seen
        seen |= frontier
    return False


@pytest.mark.parametrize("seed", range(6))
def test_group_edges_after_random_merges_equal_a_recomputation(seed: int) -> None:
    rng = random.Random(seed)
    live = _random_dag(rng, 60)
    edges = GroupEdges(live)
    next_id = len(live)
    merges = 0
    while merges < 45:
        i, j = sorted(rng.sample(sorted(live), 2))
        if rng.random() < 0.5 and edges.consumers[i]:
            i, j = sorted((i, rng.choice(sorted(edges.consumers[i]))))  # a producer and its consumer, as fusion mostly picks
        consumers, producers = GroupEdges.from_scratch(live)
        assert (edges.consumers, edges.producers) == (consumers, producers)
        assert set(edges.position) == set(live)
        assert all(edges.position[u] < edges.position[v] for u in live for v in consumers[u])  # topological
        assert all(edges.order[k] == g for g, k in edges.position.items())
        for a, b in ((i, j), (j, i)):
            assert edges.reaches_via_other(a, b) == _reaches_brute_force(consumers, a, b)
        if edges.reaches_via_other(i, j) or edges.reaches_via_other(j, i):
            continue  # fusion never merges such a pair: it would make a cycle
        live[next_id] = Group(live.pop(i).nodes + live.pop(j).nodes)
        edges.merge(i, j, next_id)
        next_id += 1
        merges += 1
    assert (edges.consumers, edges.producers) == GroupEdges.from_scratch(live)


def _fuse_from_scratch(
    program: Program,
    start: list[Group],
    backends: Mapping[str, KernelBackend],
    to_kernel_group: Callable[[Group], KernelGroup],
    max_group_nodes: int = 64,
) -> list[Group]:
    """`fuse_groups` as it was before its caches: edges rebuilt after every merge, records remade per pair."""
    live = dict(enumerate(start))
    next_id, rejected, sizes = len(live), set(), {}  # type: ignore[var-annotated]
    while True:
        by_buffer: dict[object, list[int]] = {}
        for k, g in live.items():
            if not g.is_extern:
                for name in g.names() | g.reads():
                    by_buffer.setdefault(name, []).append(k)
                if fusion._is_tiny(g):
                    by_buffer.setdefault(("tiny", g.pointwise_size), []).append(k)
        candidates = {(i, j) for members in by_buffer.values() for i in members for j in members if i < j} - rejected
        ranked = sorted(
            candidates,
            key=lambda p: (-fusion._score(program, live[p[0]], live[p[1]], sizes), abs(live[p[0]].order - live[p[1]].order), p),
        )
        merged = False
        for i, j in ranked:
            if i not in live or j not in live:
                continue
            edges = GroupEdges(live)
            fused = fusion._try_merge(live[i], live[j], edges, i, j, backends, to_kernel_group, max_group_nodes)
            if fused is None:
                rejected.add((i, j))
                continue
            del live[i], live[j]
            live[next_id] = fused
            next_id += 1
            merged = True
        if not merged:
            return sorted(live.values(), key=lambda g: g.order)


def _layer(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = torch.nn.functional.layer_norm(x, (x.shape[-1],)) @ w + b
    attention = torch.softmax(h @ h.transpose(-1, -2) / 3.0, -1) @ h
    y = torch.nn.functional.gelu(attention + x).sum(-1, keepdim=True) * x
    return y, (y - y.mean(0)).relu().amax(1), x.t().sin() + 1


@pytest.mark.parametrize("seed", range(3))
def test_fusion_equals_fusion_without_caches(seed: int) -> None:
    torch.manual_seed(seed)
    inputs = [rand(6, 8) * (seed + 1), rand(8, 8), rand(8)]
    program = inductor_ir.lower(make_fx(_layer)(*inputs), inputs)
    backend = ReferenceBackend(fuse_reductions=seed != 1)
    asked: list[tuple[str, ...]] = []

    def record(group: Group) -> KernelGroup:
        asked.append(tuple(n.name for n in group.nodes))
        return KernelGroup("candidate", group.device, group.pointwise_size, group.reduction_size, (), (), ())

    def fused(fuse: Callable[..., list[Group]]) -> list[tuple[str, ...]]:
        nodes = inductor_ir.scheduler._scheduler_nodes(program)
        start = [g for g in (Group.single(n) for n in nodes) if g is not None]
        return [tuple(n.name for n in g.nodes) for g in fuse(program, start, {"cpu": backend}, record)]

    fast = fused(fusion.fuse_groups)
    asked_fast, asked[:] = set(asked), []
    assert fast == fused(_fuse_from_scratch)
    assert asked_fast == set(asked)  # the backend was asked about the same groups
    compiled = inductor_ir.compile_graph(make_fx(_layer)(*inputs), inputs, backends={"cpu": backend})
    fresh = [rand(6, 8), rand(8, 8), rand(8)]
    assert_close(compiled(*fresh), _layer(*fresh))


def test_group_inputs_are_ordered_graph_inputs_first_then_by_buffer() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        a = torch.mm(x, y).relu()
        return (torch.mm(a, z) + a + z.t() + x).sum(1)

    inputs = [rand(5, 5), rand(5, 5), rand(5, 5)]
    sched = inductor_ir.schedule(inductor_ir.lower(make_fx(fn)(*inputs), inputs), {"cpu": ReferenceBackend()})
    program = sched.program

    def position(name: str) -> int:  # the order by a plain linear scan, which the scheduler's index must give
        for k, item in enumerate(program.graph_inputs):
            if isinstance(item, InputBuffer) and item.name == name:
                return k - 1_000_000
        for k, buf in enumerate(program.buffers):
            if buf.name == name:
                return k
        return 0

    orders = [[r.name for r in g.inputs] for g in sched.kernel_groups]
    assert any(len(names) >= 3 for names in orders), orders
    for names in orders:
        assert names == sorted(names, key=position)


def test_layout_index_cache_matches_the_formula_and_keeps_equality() -> None:
    x0, x1, x2 = (sympy.Symbol(f"x{k}", integer=True, nonnegative=True) for k in range(3))
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    layout = Layout("cpu", torch.float32, (sympy.Integer(3), s0, sympy.Integer(5)), (5 * s0, sympy.Integer(5), sympy.Integer(1)), sympy.Integer(7))
    twin = Layout("cpu", torch.float32, layout.size, layout.stride, layout.offset)
    rng = random.Random(0)
    for _ in range(30):
        index = [rng.choice([x0, x1, x2, x0 + 2 * x1, sympy.Integer(0), sympy.Integer(rng.randrange(4))]) for _ in range(3)]
        expected = layout.offset + sum((i * s for i, s in zip(index, layout.stride)), sympy.Integer(0))
        assert layout.index(index) == expected
        assert layout.index(tuple(index)) == expected  # list and tuple keys agree
    assert layout == twin and hash(layout) == hash(twin)
    assert "_offsets" not in repr(layout)


def test_placement_options_memo_equals_fresh_computation() -> None:
    n = [sympy.Integer(v) for v in (2, 3, 4, 6, 12, 24)]
    spaces = [(), (n[5],), (n[0], n[5]), (n[0], n[1], n[2]), (n[3], n[2]), (n[0], n[2], n[1])]
    for npw in spaces:
        for pw in spaces:
            for rd in ((), (n[1],), (n[2],)):
                for is_reduction in (False, True):
                    nrd = rd if is_reduction else ()
                    memo = groups._options_for(npw, nrd, is_reduction, pw, rd)
                    assert memo == groups._options_for.__wrapped__(npw, nrd, is_reduction, pw, rd)
                    assert memo is groups._options_for(npw, nrd, is_reduction, pw, rd)


def test_ops_dispatchers_are_shared_and_bind_the_handler_late() -> None:
    class Recorder:
        def __init__(self, label: str) -> None:
            self.label = label

        def sin(self, x: Any) -> str:
            return f"{self.label}.sin({x})"

    sin = ops.sin
    assert ops.sin is sin
    with set_ops_handler(Recorder("a")):
        assert sin(1) == "a.sin(1)"
    with set_ops_handler(Recorder("b")):
        assert sin(2) == "b.sin(2)" and ops.sin(3) == "b.sin(3)"
    with pytest.raises(inductor_ir.UnknownOpError):
        ops.not_an_op  # noqa: B018


class _GcProbe(ReferenceBackend):
    """Records whether the cyclic collector ran enabled while generating and while compiling."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, bool]] = []

    def generate(self, group: KernelGroup) -> Any:
        self.seen.append(("generate", gc.isenabled()))
        return super().generate(group)

    def compile(self, sources: Any) -> Any:
        self.seen.append(("compile", gc.isenabled()))
        return super().compile(sources)


@pytest.mark.parametrize("pause", [True, False])
@pytest.mark.parametrize("enabled_before", [True, False])
def test_compile_graph_pauses_the_collector_and_restores_it(pause: bool, enabled_before: bool) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() + 1).sum(0)

    example = [rand(4, 6)]
    probe = _GcProbe()
    config = inductor_ir.InductorIRConfig(pause_gc=pause, check_ir=True)
    was = gc.isenabled()
    try:
        gc.enable() if enabled_before else gc.disable()
        compiled = inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={"cpu": probe}, config=config)
        assert gc.isenabled() == enabled_before
        assert ("generate", enabled_before and not pause) in probe.seen
        assert ("compile", enabled_before) in probe.seen  # backends may fork workers here: never paused
        with pytest.raises(inductor_ir.MissingBackendError):
            inductor_ir.compile_graph(make_fx(fn)(*example), example, backends={}, config=config)
        assert gc.isenabled() == enabled_before
    finally:
        gc.enable() if was else gc.disable()
    fresh = rand(4, 6)
    assert_close(compiled(fresh), (fn(fresh),))


def _linear_compatible_by_coeff(expr: sympy.Expr, variables: tuple[sympy.Symbol, ...], sizes: tuple[sympy.Expr, ...]) -> bool:
    """The original ``_linear_compatible``: SymPy ``coeff`` per variable, then the rest checked by substitution."""
    from inductor_ir.scheduler.merge_dims import _strides
    from inductor_ir.symbolic import FloorDiv, ModularIndexing

    poly_vars = set(variables)
    if any(isinstance(n, (FloorDiv, ModularIndexing)) and n.free_symbols & poly_vars for n in sympy.preorder_traversal(expr)):
        return False
    expanded = sympy.expand(expr)
    last = expanded.coeff(variables[-1])
    if last.free_symbols & poly_vars:
        return False
    stride: sympy.Expr = sympy.Integer(1)
    for var, size in zip(reversed(variables), reversed(sizes)):
        if sympy.expand(expanded.coeff(var) - last * stride) != 0:
            return False
        stride = stride * size
    rest = expanded.subs({v: 0 for v in variables})
    linear = sum((v * s for v, s in zip(variables, _strides(sizes))), sympy.Integer(0))
    return bool(sympy.expand(expanded - rest - last * linear) == 0)


def test_linear_compatibility_equals_the_coefficient_definition() -> None:
    from inductor_ir.scheduler.merge_dims import _linear_compatible_cached, _strides
    from inductor_ir.symbolic import FloorDiv, ModularIndexing

    xs = [sympy.Symbol(f"x{k}", integer=True, nonnegative=True) for k in range(4)]
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    rng = random.Random(0)

    def leaf() -> sympy.Expr:
        pick = rng.randrange(5)
        if pick == 0:
            return sympy.Integer(rng.randrange(1, 9))
        if pick == 1:
            return s0
        if pick == 2:
            return FloorDiv(rng.choice(xs), 4) if rng.random() < 0.5 else ModularIndexing(rng.choice(xs), 2, 3)
        return rng.choice(xs)

    def random_expr(depth: int = 0) -> sympy.Expr:
        kind = rng.randrange(4) if depth < 3 else 0
        if kind == 0:
            return leaf()
        a, b = random_expr(depth + 1), random_expr(depth + 1)
        return a * b if kind == 3 else a + b

    answers = []
    for trial in range(600):
        sizes = tuple(sympy.Integer(rng.randrange(1, 6)) if rng.random() < 0.8 else s0 for _ in range(3))
        if trial % 2:
            scale = rng.choice([sympy.Integer(1), sympy.Integer(2), s0, 3 * s0])
            extra = rng.choice([sympy.Integer(0), sympy.Integer(5), s0 * xs[3], xs[3] ** 2, xs[0] * xs[1], xs[1]])
            expr = scale * sum((v * s for v, s in zip(xs, _strides(sizes))), sympy.Integer(0)) + extra
        else:
            expr = random_expr()
        for count in (1, 2, 3):
            variables = tuple(xs[:count]) if trial % 3 else tuple(rng.sample(xs, count))
            fast = _linear_compatible_cached.__wrapped__(expr, variables, sizes[:count])
            assert fast == _linear_compatible_by_coeff(expr, variables, sizes[:count]), (expr, variables, sizes)
            answers.append(fast)
    assert 0.1 < sum(answers) / len(answers) < 0.9  # both answers are exercised


def _views_and_broadcasts(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
    a = (x.unsqueeze(1) * w[:, :1]).sum(0, keepdim=True)  # size-1 dims, broadcasts, keepdim
    b = x.t()[1:, ::2].exp() + x.mean(1, keepdim=True).t()[:, :2]  # permute, slices with offsets and steps
    c = torch.cat([x, x * 2], 1).view(2, 3, 4).amax(-1)  # masks (index_expr) and a reshape (// and %)
    d = torch.nn.functional.embedding(idx, w).softmax(-1)  # indirect loads
    return a, b, c, d


@pytest.mark.parametrize("fn", [_layer, _views_and_broadcasts])
def test_renamed_lowering_traces_equal_tracing_the_body_again(fn: Callable[..., Any]) -> None:
    from inductor_ir.ir.tracing import trace_body
    from inductor_ir.scheduler.dim_maps import simplified_deps

    if fn is _layer:
        inputs = [rand(6, 8), rand(8, 8), rand(8)]
    else:
        inputs = [rand(3, 4), rand(4, 4), torch.randint(0, 4, (5,))]
    program = inductor_ir.lower(make_fx(fn)(*inputs), inputs)
    renamed = 0
    for node in inductor_ir.scheduler._scheduler_nodes(program):
        if not node.is_fusible:
            continue
        pw, rd = node.spaces()
        # Its own space; a pointwise node also inside a reduction loop over its last dim.
        placements = [(pw, rd, bool(rd))] + ([(pw[:-1], pw[-1:], True)] if not rd and pw else [])
        for group_pw, group_rd, in_loop in placements:
            xs, rs = groups.group_vars(group_pw, group_rd)
            sizes = group_pw + group_rd if in_loop else group_pw
            found = node._renamed_trace(in_loop, xs, rs)
            if found is None:
                continue
            renamed += 1
            handler = trace_body(node.body_for(in_loop, None, sizes), xs, rs if in_loop else (), text=False)
            ranges = list(zip((*xs, *rs), sizes))
            expected = (simplified_deps(handler.deps.reads, ranges), simplified_deps(handler.deps.writes, ranges))
            assert found == expected, node.name
    assert renamed >= 4
