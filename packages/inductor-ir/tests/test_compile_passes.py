"""compile_graph's passes: the caller's graph is left alone, check_ir catches broken IR, strict_lowering raises."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.scheduler.memory import StepMemory

aten = torch.ops.aten
compile_module = importlib.import_module("inductor_ir.compile")


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1) @ v


def _tied_gradient(lhs: torch.Tensor, rhs: torch.Tensor, grad: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return torch.mm(rhs.t(), lhs).t() + aten.embedding_dense_backward(grad, ids, 16, -1, False)


def _nodes(gm: torch.fx.GraphModule) -> list[tuple[str, str, object]]:
    return [(n.name, n.op, n.target) for n in gm.graph.nodes]


def _ops(program: inductor_ir.Program) -> list[object]:
    return [b.op for b in program.buffers if isinstance(b, inductor_ir.ExternKernel)]


@pytest.mark.parametrize("case", ["attention", "tied_embedding"])
def test_compile_graph_leaves_the_callers_graph_alone(case: str) -> None:
    if case == "attention":
        fn: Any = _attention
        make = lambda: [rand(1, 2, 12, 4), rand(1, 2, 12, 4), rand(1, 2, 12, 4)]  # noqa: E731
        rewritten_from = aten.bmm.default  # q @ k.T and @ v: one fused attention call instead
    else:
        fn = _tied_gradient
        make = lambda: [rand(24, 16), rand(24, 8), rand(4, 6, 8), torch.randint(0, 16, (4, 6))]  # noqa: E731
        rewritten_from = aten.embedding_dense_backward.default  # folded into index_put
    example = make()
    gm = make_fx(fn)(*example)
    nodes, code = _nodes(gm), gm.code
    compiled = inductor_ir.compile_graph(gm, example, backends={"cpu": ReferenceBackend()})
    assert rewritten_from not in _ops(compiled.program)  # the rewrite happened, on a copy
    assert rewritten_from in [target for _, _, target in nodes]
    assert _nodes(gm) == nodes and gm.code == code
    fresh = make()
    assert_close(compiled(*fresh), [fn(*fresh)])
    assert_close(gm(*fresh), [fn(*fresh)])


def test_graph_passes_return_their_argument_when_nothing_matches() -> None:
    x = rand(4, 8)
    gm = make_fx(lambda a: torch.softmax(a, -1).sum(0) + 1)(x)
    assert inductor_ir.fuse_attention_pass(gm) is gm
    assert inductor_ir.fold_embedding_gradients_pass(gm) is gm


def _lowered(fn: Any, *example: torch.Tensor) -> inductor_ir.Program:
    return inductor_ir.lower(make_fx(fn)(*example), list(example))


def _read_before_written(program: inductor_ir.Program) -> inductor_ir.Program:
    """``program`` with its last two buffers swapped: the consumer now comes before its producer."""
    buffers = list(program.buffers)
    buffers[-2], buffers[-1] = buffers[-1], buffers[-2]
    return dataclasses.replace(program, buffers=buffers)


def test_program_check_catches_a_buffer_read_before_it_is_written() -> None:
    x = rand(12, 10)  # sums over more rows than are written out as pointwise expressions
    program = _lowered(lambda a: (a.sin() * 2).sum(0) + a.t().cos().sum(1), x)
    program.check()
    with pytest.raises(AssertionError, match="before it is defined"):
        _read_before_written(program).check()


def test_program_check_catches_an_extern_call_reading_a_later_buffer() -> None:
    x, w = rand(4, 4), rand(4, 4)
    program = _lowered(lambda a, b: torch.mm(a.exp(), b), x, w)
    assert aten.mm.default in _ops(program)
    with pytest.raises(AssertionError, match=r"reads buf\d+ before it is defined"):
        _read_before_written(program).check()


def test_check_ir_runs_after_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    real_lower = compile_module.lower

    def broken_lower(*args: Any, **kwargs: Any) -> inductor_ir.Program:
        return _read_before_written(real_lower(*args, **kwargs))

    monkeypatch.setattr(compile_module, "lower", broken_lower)
    x = rand(12, 10)
    gm = make_fx(lambda a: (a.sin() * 2).sum(0) + a.t().cos().sum(1))(x)
    checked = inductor_ir.InductorIRConfig(check_ir=True)
    with pytest.raises(AssertionError, match="before it is defined"):
        inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()}, config=checked)


def test_schedule_check_catches_a_buffer_freed_before_its_last_read() -> None:
    x = rand(6, 5)
    program = _lowered(lambda a: (a.sin() @ a.t()).cos(), x)
    sched = inductor_ir.schedule(program, {"cpu": ReferenceBackend()})
    sched.check()
    assert len(sched.steps) == 3  # sin, mm, cos
    first = sched.steps[0]
    assert isinstance(first, inductor_ir.KernelStep)
    (written,) = first.group.outputs
    memory = sched.memory.steps[0]
    sched.memory.steps[0] = StepMemory(memory.allocations, [*memory.frees, written.name])
    with pytest.raises(AssertionError, match=f"reads {written.name}, which no earlier step wrote or which was freed"):
        sched.check()


def _sin_lowering_bug(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a bug in the sin lowering")


def test_strict_lowering_raises_where_the_default_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(inductor_ir.LOWERINGS, aten.sin.default, _sin_lowering_bug)
    x = rand(4, 4)
    gm = make_fx(lambda a: a.sin() + 1)(x)
    compiled = inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()})
    (error,) = compiled.program.lowering_errors
    assert "a bug in the sin lowering" in error and "FallbackKernel" in error
    assert aten.sin.default in _ops(compiled.program)
    fresh = rand(4, 4)
    assert_close(compiled(fresh), [fresh.sin() + 1])
    strict = inductor_ir.InductorIRConfig(strict_lowering=True)
    with pytest.raises(RuntimeError, match="a bug in the sin lowering") as raised:
        inductor_ir.compile_graph(gm, [x], backends={"cpu": ReferenceBackend()}, config=strict)
    assert any("while lowering" in note and "sin" in note for note in raised.value.__notes__)
