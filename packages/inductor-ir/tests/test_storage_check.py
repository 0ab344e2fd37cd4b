"""Kernel calls never pass one memory twice: in-place reuse is one argument, and the wrapper checks it.

Kernels declare their pointer arguments not to alias (`__restrict__`). An output written over a
dying input's memory therefore reaches the kernel as ONE argument (`KernelGroup.in_place`), and the
wrapper generator proves, for every kernel call it writes, that the arguments name distinct
storages (following plain and in-place reuse), raising an internal error otherwise.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from inductor_ir_reference_backend import ReferenceBackend
from inductor_ir_testing import assert_close, rand
from torch.fx.experimental.proxy_tensor import make_fx

import inductor_ir
from inductor_ir.scheduler import KernelStep
from inductor_ir.storage_check import KernelArgumentAliasError, StorageTracker


def _square_sum(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a = x @ w + y
    return (a**2).sum(), a


def _schedule(fn: object, *inputs: torch.Tensor) -> inductor_ir.Schedule:
    program = inductor_ir.lower(make_fx(fn)(*inputs), list(inputs))
    return inductor_ir.schedule(program, {"cpu": ReferenceBackend()})


def test_in_place_output_and_its_input_are_one_argument() -> None:
    sched = _schedule(_square_sum, rand(5, 7), rand(7, 3), rand(5, 3))
    (group,) = sched.kernel_groups
    (shared,) = group.in_place
    mm = shared.input.name
    assert mm not in {r.name for r in group.inputs}  # no argument of its own
    assert shared.output in {r.name for r in group.outputs}
    assert group.buffers()[mm] == shared.input  # backends still learn its dtype and layout
    pointers = group.pointer_names()
    assert pointers[mm] == pointers[shared.output] == "in_out_ptr0"
    assert pointers[group.inputs[0].name] == "in_ptr0" and len(set(pointers.values())) == 3
    source = inductor_ir.wrapper_source(sched)
    call = next(line.strip() for line in source.splitlines() if line.strip().startswith(group.name + "("))
    assert f"{shared.output} = {mm}  # reuse in place" in source
    assert call == f"{group.name}({group.inputs[0].name}, {shared.output}, {group.outputs[1].name})"
    assert "in place:" in inductor_ir.describe_group(group)


def test_reference_backend_reads_the_in_place_input_through_its_output() -> None:
    inputs = [rand(6, 7), rand(7, 3), rand(6, 3)]
    compiled = inductor_ir.compile_graph(make_fx(_square_sum)(*inputs), inputs, backends={"cpu": ReferenceBackend()})
    assert compiled.schedule.kernel_groups[0].in_place
    inputs = [rand(6, 7), rand(7, 3), rand(6, 3)]
    assert_close(compiled(*inputs), _square_sum(*inputs))


def test_wrapper_refuses_a_call_passing_one_memory_twice() -> None:
    """A group whose in-place input is also a separate argument (the old convention) is rejected."""
    sched = _schedule(_square_sum, rand(5, 7), rand(7, 3), rand(5, 3))
    (k, step) = next((k, s) for k, s in enumerate(sched.steps) if isinstance(s, KernelStep))
    group = step.group
    apart = dataclasses.replace(group, inputs=(*group.inputs, group.in_place[0].input), in_place=())
    sched.steps[k] = KernelStep(apart)
    with pytest.raises(KernelArgumentAliasError, match=r"internal error .* share the memory first allocated as"):
        inductor_ir.wrapper_source(sched)


def test_storage_tracker_follows_plain_and_in_place_reuse() -> None:
    storages = StorageTracker()
    storages.fresh("buf0")
    storages.fresh("buf1")
    storages.share("buf2", "buf0")  # buf2 = buf0; del buf0  # reuse
    storages.share("buf3", "buf2")  # buf3 = buf2  # reuse in place
    assert storages.storage("buf3") == storages.storage("buf2") == "buf0"
    assert storages.storage("x_1") == "x_1"  # graph inputs and extern results: their own memory
    storages.check_call("k0", ["x_1", "buf1", "buf3"])
    for arguments in (["buf2", "buf3"], ["buf0", "x_1", "buf3"], ["buf1", "buf1"]):
        with pytest.raises(KernelArgumentAliasError):
            storages.check_call("k1", arguments)
    storages.fresh("buf0")  # a name bound to new memory again no longer shares the old one
    storages.check_call("k2", ["buf0", "buf3"])
