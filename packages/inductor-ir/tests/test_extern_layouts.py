"""Matmul operands that are transposes of values not yet in memory reach ATen as transposed views."""

from __future__ import annotations

import pytest
import sympy
import torch
from inductor_ir_testing import check_interpret, rand

import inductor_ir


def _externs(program: inductor_ir.Program) -> list[inductor_ir.ExternKernel]:
    return [b for b in program.buffers if type(b) is inductor_ir.ExternKernel]


def _computed(program: inductor_ir.Program) -> dict[str, inductor_ir.ComputedBuffer]:
    return {b.name: b for b in program.buffers if isinstance(b, inductor_ir.ComputedBuffer)}


def _ints(values: tuple[sympy.Expr, ...]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def test_mm_of_a_transposed_pointwise_reads_it_in_its_own_order() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.mm((a * b).sin().t(), w)

    program = check_interpret(fn, lambda: [rand(16, 24), rand(16, 24), rand(16, 8)])
    (mm,) = _externs(program)
    view = mm.args[0]
    assert isinstance(view, inductor_ir.ReinterpretView)
    assert _ints(view.get_size()) == (24, 16) and _ints(view.layout.stride) == (1, 24)
    base = _computed(program)[view.data.name]
    assert _ints(base.layout.size) == (16, 24) and _ints(base.layout.stride) == (24, 1)  # unit-stride stores


def test_a_value_used_plain_and_transposed_is_computed_once() -> None:
    def fn(a: torch.Tensor, w: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        grad = a.exp() * a
        return torch.mm(grad, w), torch.mm(grad.t(), v)

    program = check_interpret(fn, lambda: [rand(12, 20), rand(20, 5), rand(12, 7)])
    assert len(_computed(program)) == 1
    first, second = _externs(program)
    assert first.args[0] is second.args[0].data


@pytest.mark.parametrize("op", ["addmm", "bmm", "baddbmm"])
def test_addmm_bmm_and_baddbmm_take_transposed_operands(op: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        left, right = x.cos(), (y + 1).transpose(-1, -2)
        if op == "addmm":
            return torch.addmm(bias, left, right)
        if op == "bmm":
            return torch.bmm(left, right) + bias
        return torch.baddbmm(bias, left, right)

    shapes = {
        "addmm": [(6, 10), (9, 10), (9,)],
        "bmm": [(3, 6, 10), (3, 9, 10), (9,)],
        "baddbmm": [(3, 6, 10), (3, 9, 10), (3, 6, 9)],
    }
    program = check_interpret(fn, lambda: [rand(*shape) for shape in shapes[op]])
    (kernel,) = _externs(program)
    views = [a for a in kernel.args if isinstance(a, inductor_ir.ReinterpretView)]
    assert len(views) == 1 and _ints(views[0].layout.stride)[-2:] == (1, 10)


def test_other_permutations_of_a_bmm_operand_are_still_copied_in_order() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.bmm(x.sin().transpose(0, 1), y)

    program = check_interpret(fn, lambda: [rand(5, 3, 4), rand(3, 4, 6)])
    (kernel,) = _externs(program)
    operand = kernel.args[0]
    assert isinstance(operand, inductor_ir.ComputedBuffer)
    assert _ints(operand.layout.size) == (3, 5, 4) and _ints(operand.layout.stride) == (20, 4, 1)
