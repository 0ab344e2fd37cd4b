"""Scheduler: fusion decisions, group records, memory planning (buffer reuse, in place)."""

from __future__ import annotations

from typing import Any

import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir


def _schedule(fn: Any, *inputs: torch.Tensor, backend: Any = None) -> inductor_ir.Schedule:
    gm = make_fx(fn)(*inputs)
    program = inductor_ir.lower(gm, list(inputs))
    return inductor_ir.schedule(program, {"cpu": backend or ReferenceBackend()})


def _loads(group: inductor_ir.KernelGroup) -> list[str]:
    xs, rs = group.make_index_vars()
    names = []
    for node in group.nodes:
        trace = inductor_ir.ir.trace_body(node.body, xs, rs if node.in_reduction_loop else ())
        names += [dep.name for dep in trace.deps.reads]
    return names


def test_sin_cos_is_one_group_with_one_read_and_two_writes() -> None:
    def toy(x: torch.Tensor) -> Any:
        y = x.sin()
        return y, y.cos()

    sched = _schedule(toy, rand(8, 16))
    (group,) = sched.kernel_groups
    assert [r.name for r in group.inputs] == ["x_1"]
    assert len(group.outputs) == 2 and group.internal == ()
    assert _loads(group).count("x_1") == 1
    assert group.reduction_size == () and group.name.startswith("fused_sin_cos")


def test_softmax_is_one_reduction_group_with_epilogue() -> None:
    def softmax(x: torch.Tensor) -> torch.Tensor:
        m = x.amax(-1, keepdim=True)
        e = (x - m).exp()
        return e / e.sum(-1, keepdim=True)

    for fn in (softmax, lambda x: torch.softmax(x, -1)):
        sched = _schedule(fn, rand(4, 32))
        (group,) = sched.kernel_groups
        assert group.pointwise_size == (4,) and group.reduction_size == (32,)
        kinds = [(n.kind, n.loop, n.in_reduction_loop) for n in group.nodes]
        assert kinds == [("reduction", 0, True), ("reduction", 1, True), ("pointwise", 2, True)]
        assert len(group.internal) == 2 and len(group.outputs) == 1


def test_reduction_with_pointwise_epilogue_after_the_loop() -> None:
    sched = _schedule(lambda x: x.sum(1).sqrt() + 1, rand(6, 10))
    (group,) = sched.kernel_groups
    assert [(n.kind, n.in_reduction_loop) for n in group.nodes] == [("reduction", True), ("pointwise", False)]


def test_independent_reductions_over_one_input_fuse_horizontally() -> None:
    sched = _schedule(lambda x: (x.sum(1), x.amax(1)), rand(6, 10))
    (group,) = sched.kernel_groups
    assert len(group.outputs) == 2 and _loads(group).count("x_1") == 2


def test_no_fusion_across_an_extern_call() -> None:
    sched = _schedule(lambda x, w: (torch.mm(x.sin(), w) + 1), rand(4, 5), rand(5, 3))
    kinds = [type(s).__name__ for s in sched.steps]
    assert kinds == ["KernelStep", "ExternStep", "KernelStep"]


def test_backend_can_refuse_fusion() -> None:
    sched = _schedule(lambda x: x.sum(1).sqrt() + 1, rand(6, 10), backend=ReferenceBackend(fuse_reductions=False))
    assert len(sched.kernel_groups) == 2


def test_buffer_reuse_in_a_chain_of_same_shaped_intermediates() -> None:
    def chain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        for _ in range(4):
            x = torch.mm(x.sin(), w)  # the extern call makes every sin() a buffer of the same layout
        return x

    x, w = rand(8, 8), rand(8, 8)
    gm = make_fx(chain)(x, w)
    compiled = inductor_ir.compile_graph(gm, [x, w], backends={"cpu": ReferenceBackend()})
    wrapper = compiled.wrapper
    assert len(compiled.schedule.kernel_groups) == 4
    assert wrapper.count("empty_strided(") == 1, wrapper
    assert wrapper.count("# reuse") == 3 and compiled.schedule.memory.reused_allocations == 3
    x, w = rand(8, 8), rand(8, 8)
    assert_close(compiled(x, w), chain(x, w))


def test_in_place_reuse_of_a_dying_input() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        return torch.mm(a, a.t()).relu() * 2  # the mm result dies where relu reads it at its own index

    x = rand(4, 8)
    compiled = inductor_ir.compile_graph(make_fx(fn)(x), [x], backends={"cpu": ReferenceBackend()})
    assert "# reuse in place" in compiled.wrapper
    x = rand(4, 8)
    assert_close(compiled(x), fn(x))


def test_group_records_describe_dynamic_sizes() -> None:
    x = rand(8, 16)
    gm = make_fx(lambda a: a.sin().cos(), tracing_mode="symbolic")(x)
    program = inductor_ir.lower(gm, [x])
    (group,) = inductor_ir.schedule(program, {}).kernel_groups
    assert len(group.size_symbols) == 2
    assert len(group.pointwise_size) == 1  # contiguous dims merged: one dim of s0*s1
    assert group.pointwise_size[0].free_symbols == set(group.size_symbols)


def test_contiguous_dims_merge_only_when_every_access_allows() -> None:
    (merged,) = _schedule(lambda a, b: a.sin() + b, rand(4, 6), rand(4, 6)).kernel_groups
    assert merged.pointwise_size == (24,)
    (kept,) = _schedule(lambda a, b: a.t() + b, rand(6, 4), rand(4, 6)).kernel_groups
    assert kept.pointwise_size == (4, 6)
    (inner,) = _schedule(lambda a: a.sum((1, 2)), rand(3, 4, 5)).kernel_groups
    assert inner.pointwise_size == (3,) and inner.reduction_size == (20,)


def test_dead_code_is_not_scheduled() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        x.exp().sum()  # traced, never used
        return x.sin()

    x = rand(4, 4)
    program = inductor_ir.lower(make_fx(fn)(x), [x])
    assert len(program.buffers) == 2  # the dead sum is in the IR ...
    sched = inductor_ir.schedule(program, {"cpu": ReferenceBackend()})
    origins = {o for g in sched.kernel_groups for n in g.nodes for o in n.origins}
    assert origins == {"sin"}  # ... but not in any kernel


def test_tensor_constants_are_kernel_inputs() -> None:
    table = rand(4)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * table

    x = rand(3, 4)
    gm = make_fx(fn)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    assert compiled.program.constants
    x = rand(3, 4)
    assert_close(compiled(x), fn(x))


def test_long_pointwise_chains_are_cut_into_bounded_bodies() -> None:
    def chain(x: torch.Tensor) -> torch.Tensor:
        for _ in range(100):
            x = (x * 1.01).sin()  # one user each: inlined until the chain gets long
        return x

    x = rand(4, 4)
    program = inductor_ir.lower(make_fx(chain)(x), [x])
    assert 2 <= len(program.buffers) <= 10
    sched = inductor_ir.schedule(program, {"cpu": ReferenceBackend()})
    assert len(sched.kernel_groups) == 1  # the pieces still fuse back into one kernel
    x = rand(4, 4)
    assert_close(inductor_ir.interpret(program, [x]), [chain(x)])


class _RowReloadingBackend(ReferenceBackend):
    """A reference backend that says its kernels may load back, in a later loop, a row they stored."""

    reloads_stored_rows = True


def _saved_softmax_then_norm(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.softmax(x, -1)  # kept: a training graph saves it for the backward
    h = s + y
    return s, (h - h.mean(-1, keepdim=True)) * (h.var(-1, keepdim=True) + 1e-5).rsqrt()


def test_a_saved_row_feeds_a_later_loop_only_where_the_backend_reloads_rows() -> None:
    x, y = rand(6, 33), rand(6, 33)
    # Kept apart where values of a loop are read only in that loop (Triton keeps them in registers).
    assert len(_schedule(_saved_softmax_then_norm, x, y).kernel_groups) == 2
    sched = _schedule(_saved_softmax_then_norm, x, y, backend=_RowReloadingBackend())
    (group,) = sched.kernel_groups
    loops = {n.name: (n.loop, n.in_reduction_loop) for n in group.nodes}
    softmax = next(n.name for n in group.nodes if n.loop == 2 and n.kind == "pointwise" and n.in_reduction_loop)
    assert softmax in {r.name for r in group.outputs}  # stored, since a later loop loads it back
    assert max(loop for loop, _ in loops.values()) == 3
    # The row a later loop reloads never takes an input's memory in place.
    assert all(shared.output.name != softmax for shared in group.in_place)
    gm = make_fx(_saved_softmax_then_norm)(x, y)
    compiled = inductor_ir.compile_graph(gm, [x, y], backends={"cpu": _RowReloadingBackend()})
    x, y = rand(6, 33), rand(6, 33)
    for got, want in zip(compiled(x, y), _saved_softmax_then_norm(x, y)):
        assert_close(got, want)


def test_few_long_rows_keep_their_loops_apart_even_where_rows_reload() -> None:
    # One row of 16,384: a kernel of several loops would run it on one thread.
    x, y = rand(1, 16384), rand(1, 16384)
    reloading = _schedule(_saved_softmax_then_norm, x, y, backend=_RowReloadingBackend()).kernel_groups
    assert len(reloading) == len(_schedule(_saved_softmax_then_norm, x, y).kernel_groups)
    assert all(max((n.loop for n in group.nodes), default=0) <= 2 for group in reloading)
