"""Split reductions: a reduction with few outputs and a long range becomes two kernels.

The first kernel cuts the range into `split` chunks and runs one program per (outputs block, chunk)
(grid axis 1 is the chunk), writing each reduction's partial result to a workspace
`ws[x * split + chunk]`. The second is a persistent reduction over the `split` partials of each output
that stores the finished values and runs the group's after-loop (epilogue) nodes. Without it, a
reduction to a handful of outputs (a loss, batch-norm statistics, a bias gradient) would run on a
handful of programs while the GPU has over a hundred SMs.
"""

from __future__ import annotations

import dataclasses

import sympy
import torch

from codegen_triton.codegen.analysis import reads_reduction_contiguously, record_accesses
from codegen_triton.codegen.kernel import KernelPlan, KernelWriter, workspace_name
from codegen_triton.codegen.values import compute_dtype
from inductor_ir.backend import BufferRecord, KernelGroup

__all__ = ["SPLITTABLE", "plan_split", "workspace_name", "write_finish"]

SPLITTABLE = frozenset({"sum", "prod", "max", "min", "any"})
"""Reductions whose partial results combine with the same reduction."""

_TARGET_PROGRAMS = 1024  # several programs per SM on current GPUs (an H200 has 132 SMs)
_MIN_CHUNK = 2048  # a multiple of every RBLOCK tried, so chunks never straddle a block
_MIN_RNUMEL = 8192
_OUTER_XBLOCK = 64
# An outer reduction (a column sum over tokens: a norm weight's or bias's gradient) has few programs
# along x even for a modest range (2,048 outputs over 2,048 rows: 32 programs of 64 columns), so it
# splits from shorter ranges, in chunks of this many rows (its RBLOCK is capped to the chunk).
_OUTER_MIN_RNUMEL = 1024
_OUTER_MIN_CHUNK = 128


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def plan_split(group: KernelGroup, plan: KernelPlan) -> KernelPlan:
    """`plan` with `split`/`split_chunk` set when the group should be a split reduction, else `plan`."""
    if plan.kind != "looped" or group.num_loops != 1:
        return plan
    xnumel = sympy.Mul(*group.pointwise_size)
    rnumel = sympy.Mul(*group.reduction_size)
    if not (isinstance(xnumel, sympy.Integer) and isinstance(rnumel, sympy.Integer)):
        return plan
    if int(xnumel) == 0:
        return plan  # no outputs (a softmax over a dim of an empty tensor): nothing to spread
    # The plan's walk, by majority: a column sum that also reads each row's statistic is outer.
    inner = plan.hint != "outer" and reads_reduction_contiguously(group)
    if int(rnumel) < (_MIN_RNUMEL if inner else _OUTER_MIN_RNUMEL):
        return plan
    # Pointwise nodes inside the loop (e.g. a batch-norm backward's gradient term, stored while its
    # per-channel sums accumulate) run in the first kernel: each chunk stores its own elements.
    for node in group.nodes:
        if node.in_reduction_loop and node.kind == "reduction" and node.reduction_type not in SPLITTABLE:
            return plan
    # Programs along x at the XBLOCK the launch tries first (runtime/autotune.py's _LOOPED_FIRST): a
    # walk along the outputs ("outer") runs wide XBLOCKs, so fewer x programs; other walks run one or
    # a few outputs per program. Assuming wide blocks for a walk that is neither (a gather's rank
    # reduction) cut 1,776 outputs into 14 chunks for 28 programs, which ran as 24,864.
    x_programs = _cdiv(int(xnumel), _OUTER_XBLOCK) if plan.hint == "outer" else int(xnumel)
    min_chunk = _MIN_CHUNK if inner else _OUTER_MIN_CHUNK
    split = min(_cdiv(_TARGET_PROGRAMS, x_programs), _cdiv(int(rnumel), min_chunk))
    if split < 2:
        return plan
    chunk = _cdiv(_cdiv(int(rnumel), split), min_chunk) * min_chunk
    return dataclasses.replace(plan, split=_cdiv(int(rnumel), chunk), split_chunk=chunk)


def workspaces(group: KernelGroup) -> list[tuple[str, torch.dtype]]:
    """(reduction buffer, workspace dtype) for each reduction node, in node order."""
    return [(node.name, compute_dtype(node.dtype)) for node in group.nodes if node.kind == "reduction"]


def write_finish(
    group: KernelGroup, plan: KernelPlan, runtime_checks: bool = True, interpret: bool = False
) -> KernelWriter:
    """The writer of the finishing kernel, with its body written (header not yet added)."""
    xnumel = int(sympy.Mul(*group.pointwise_size))
    records = tuple(
        BufferRecord(workspace_name(name), dtype, (sympy.Integer(xnumel * plan.split),), (sympy.Integer(1),))
        for name, dtype in workspaces(group)
    )
    finish_group = dataclasses.replace(
        group, reduction_size=(sympy.Integer(plan.split),), inputs=(*records, *group.inputs)
    )
    writer = KernelWriter(finish_group, KernelPlan("persistent", use_int64=plan.use_int64), runtime_checks, interpret)
    xs, _ = group.make_index_vars()
    zeros = {var: sympy.Integer(0) for var, size in zip(xs, group.pointwise_size) if size == 1}
    stores = {a.name: a.index.subs(zeros) for a in record_accesses(group) if a.is_store}
    flat: sympy.Expr = sympy.Integer(0)
    for var, size in zip(writer.index_vars, group.pointwise_size):
        flat = flat * size + var
    chunk_var = writer.reduction_vars[0] if writer.reduction_vars else sympy.Integer(0)
    for node in group.nodes:
        if node.kind != "reduction":
            continue
        writer.set_reduction_region(True)
        partial = writer.load(workspace_name(node.name), flat * plan.split + chunk_var)
        assert node.reduction_type is not None
        value = writer.reduction(node.dtype, partial.dtype, node.reduction_type, partial)
        writer.set_reduction_region(False)
        writer.store_reduction(node.name, stores[node.name], value)
    for node in group.nodes:
        if not node.in_reduction_loop:
            writer.run_node(node)
    return writer
