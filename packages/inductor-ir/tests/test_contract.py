"""The backend contract checker: groups that break a rule code generators rely on are refused."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.backend import InPlaceBuffer
from inductor_ir.scheduler.contract import check_group


class _RowReloadingBackend(ReferenceBackend):
    reloads_stored_rows = True


def _saved_softmax_then_norm(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.softmax(x, -1)
    h = s + y
    return s, (h - h.mean(-1, keepdim=True)) * (h.var(-1, keepdim=True) + 1e-5).rsqrt()


def _groups(fn: Any, *inputs: torch.Tensor, backend: Any = None) -> list[inductor_ir.KernelGroup]:
    program = inductor_ir.lower(make_fx(fn)(*inputs), list(inputs))
    return inductor_ir.schedule(program, {"cpu": backend or ReferenceBackend()}).kernel_groups


def test_a_row_reloaded_by_a_later_loop_needs_a_backend_that_says_so() -> None:
    (group,) = _groups(_saved_softmax_then_norm, rand(6, 33), rand(6, 33), backend=_RowReloadingBackend())
    check_group(group, reloads_stored_rows=True)
    with pytest.raises(AssertionError, match="a value of loop 2, in loop 3"):
        check_group(group, reloads_stored_rows=False)
    # The reloaded row must be stored: kept in registers only, the later loop would read garbage.
    softmax = next(n.name for n in group.nodes if n.kind == "pointwise" and n.loop == 2)
    record = next(r for r in group.outputs if r.name == softmax)
    hidden = dataclasses.replace(
        group, outputs=tuple(r for r in group.outputs if r.name != softmax), internal=(*group.internal, record)
    )
    with pytest.raises(AssertionError, match="is not stored"):
        check_group(hidden, reloads_stored_rows=True)


def test_a_value_read_before_its_reduction_finishes_is_refused() -> None:
    (group,) = _groups(lambda x: torch.softmax(x, -1), rand(4, 32))
    check_group(group)
    # Move the division (loop 2) into the loop of the sum it divides by.
    nodes = list(group.nodes)
    nodes[-1] = dataclasses.replace(nodes[-1], loop=1)
    with pytest.raises(AssertionError, match="before that reduction's loop has finished"):
        check_group(dataclasses.replace(group, nodes=tuple(nodes)))


def test_an_input_read_after_the_output_written_over_it_is_refused() -> None:
    x, y = rand(6, 33), rand(6, 33)
    (group,) = _groups(_saved_softmax_then_norm, x, y, backend=_RowReloadingBackend())
    normalized = group.nodes[-1].name
    # `y` is read in loops 2 and 3: the output of loop 3 may take its memory, the softmax row of loop
    # 2 may not (loop 3 reads `y` again after it).
    y_record = next(r for r in group.inputs if r.name not in {n.name for n in group.nodes} and r.size == (6, 33))
    others = tuple(r for r in group.inputs if r.name != y_record.name)
    fine = dataclasses.replace(group, inputs=others, in_place=(InPlaceBuffer(y_record, normalized),))
    check_group(fine, reloads_stored_rows=True)
    softmax = next(n.name for n in group.nodes if n.kind == "pointwise" and n.loop == 2)
    with pytest.raises(AssertionError, match="written over an input in place"):
        check_group(dataclasses.replace(group, inputs=others, in_place=(InPlaceBuffer(y_record, softmax),)), True)

    # Doubled in loop 0, shifted by the row's max in loop 1: `x` is read again after `x * 2` is stored.
    def doubled_and_shifted(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x - x.amax(-1, keepdim=True)

    (group,) = _groups(doubled_and_shifted, rand(6, 33))
    doubled = next(n.name for n in group.nodes if n.kind == "pointwise" and n.loop == 0)
    (x_record,) = group.inputs
    with pytest.raises(AssertionError, match="is read after"):
        check_group(dataclasses.replace(group, inputs=(), in_place=(InPlaceBuffer(x_record, doubled),)))
