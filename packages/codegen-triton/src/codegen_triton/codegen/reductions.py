"""Reductions in Triton: persistent (one block holds the whole range) and looped (RBLOCK steps).

A persistent reduction masks the lanes past the range with the reduction's identity and reduces the
block along its r axis. A looped reduction keeps an `[XBLOCK, RBLOCK]` accumulator, combines each
step's block into it elementwise, and reduces the accumulator after the loop. argmax/argmin carry
(value, index) pairs; indices are linear in the reduction range (`rindex`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from codegen_triton.codegen.values import TritonValue, compute_dtype, triton_type

if TYPE_CHECKING:
    from codegen_triton.codegen.kernel import KernelWriter

__all__ = ["emit_reduction"]

_COMBINE = {"prod": "helpers.prod_combine", "max": "helpers.max_combine", "min": "helpers.min_combine"}
_ARG_COMBINE = {"argmax": "helpers.argmax_combine", "argmin": "helpers.argmin_combine"}
# An index that loses every tie against a real one.
_FAR_INDEX = "9223372036854775807"


def _full_block(writer: KernelWriter, value: TritonValue) -> str:
    return f"tl.broadcast_to({value.name}, {writer.shape(frozenset({'x', 'r'}))})"


def _reduce_block(kind: str, block: str) -> str:
    """Source reducing an `[XBLOCK, RBLOCK]` block along r, keeping an `[XBLOCK, 1]` shape."""
    if kind == "sum":
        return f"tl.sum({block}, 1)[:, None]"
    if kind == "any":
        return f"(tl.max(({block}).to(tl.int8), 1) != 0)[:, None]"
    return f"tl.reduce({block}, 1, {_COMBINE[kind]})[:, None]"


def emit_reduction(
    writer: KernelWriter, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: TritonValue
) -> TritonValue:
    """Write the lines of one reduction; returns its `[XBLOCK, 1]` result."""
    kind = reduction_type
    if kind in ("max", "min") and dtype == torch.bool:
        kind = "any" if kind == "max" else "all"
    if kind == "all":
        inverted = writer.emit(f"{value.name} == 0", torch.bool, value.axes)
        result = emit_reduction(writer, torch.bool, torch.bool, "any", inverted)
        return writer.emit(f"{result.name} == 0", torch.bool, result.axes)
    if kind in _ARG_COMBINE:
        return _arg_reduction(writer, kind, src_dtype, value)
    acc_dtype = torch.bool if kind == "any" else compute_dtype(dtype)
    if value.dtype != acc_dtype and kind != "any":
        value = writer.to_dtype(value, acc_dtype, value.dtype)
    identity = writer.float_identity(kind, acc_dtype)
    full = writer.shape(frozenset({"x", "r"}))
    ty = triton_type(acc_dtype)
    x_axes = frozenset({"x"})
    if writer.plan.kind == "persistent":
        block = writer.emit(
            f"tl.where(rmask, {_full_block(writer, value)}, {identity})", acc_dtype, frozenset({"x", "r"})
        )
        return writer.emit(_reduce_block(kind, block.name), dtype, x_axes)
    init, finish = writer.loop_init, writer.loop_finish
    assert init is not None and finish is not None, "looped reduction outside a loop"
    acc = writer.new_name("_acc")
    init.lines.append(f"{acc} = tl.full({full}, {identity}, {ty})")
    step = writer.emit(_full_block(writer, value), acc_dtype, frozenset({"x", "r"}))
    if kind == "sum":
        combined = f"{acc} + {step.name}"
    elif kind == "any":
        combined = f"{acc} | {step.name}"
    else:
        combined = f"{_COMBINE[kind]}({acc}, {step.name})"
    writer.target.lines.append(f"{acc} = tl.where(rmask, {combined}, {acc})")
    result = TritonValue(writer.new_name(), dtype, x_axes)
    finish.lines.append(f"{result.name} = {_reduce_block(kind, acc)}")
    writer.outer_names.add(result.name)
    return result


def _arg_reduction(
    writer: KernelWriter, kind: str, src_dtype: torch.dtype, value: TritonValue
) -> TritonValue:
    value_dtype = compute_dtype(src_dtype)
    identity = writer.float_identity(kind, value_dtype)
    combine = _ARG_COMBINE[kind]
    full = writer.shape(frozenset({"x", "r"}))
    x_axes = frozenset({"x"})
    both = frozenset({"x", "r"})
    index = writer.emit(f"tl.broadcast_to(rindex, {full}).to(tl.int64)", torch.int64, both)
    if writer.plan.kind == "persistent":
        block = writer.emit(f"tl.where(rmask, {_full_block(writer, value)}, {identity})", value_dtype, both)
        name = writer.new_name()
        writer.target.lines.append(f"_, {name} = tl.reduce(({block.name}, {index.name}), 1, {combine})")
        return writer.emit(f"{name}[:, None]", torch.int64, x_axes)
    init, finish = writer.loop_init, writer.loop_finish
    assert init is not None and finish is not None, "looped reduction outside a loop"
    acc_value, acc_index = writer.new_name("_acc"), writer.new_name("_acc_index")
    init.lines.append(f"{acc_value} = tl.full({full}, {identity}, {triton_type(value_dtype)})")
    init.lines.append(f"{acc_index} = tl.full({full}, {_FAR_INDEX}, tl.int64)")
    step = writer.emit(_full_block(writer, value), value_dtype, both)
    next_value, next_index = writer.new_name("_next"), writer.new_name("_next_index")
    writer.target.lines.append(
        f"{next_value}, {next_index} = {combine}({acc_value}, {acc_index}, {step.name}, {index.name})"
    )
    writer.target.lines.append(f"{acc_value} = tl.where(rmask, {next_value}, {acc_value})")
    writer.target.lines.append(f"{acc_index} = tl.where(rmask, {next_index}, {acc_index})")
    name = writer.new_name()
    finish.lines.append(f"_, {name} = tl.reduce(({acc_value}, {acc_index}), 1, {combine})")
    result = TritonValue(writer.new_name(), torch.int64, x_axes)
    finish.lines.append(f"{result.name} = {name}[:, None]")
    writer.outer_names.add(result.name)
    return result
