"""Reductions in Triton: persistent (one block holds the whole range) and looped (RBLOCK steps).

A persistent reduction masks the lanes past the range with the reduction's identity and reduces the
block along its r axis. A looped reduction keeps an `[XBLOCK, RBLOCK]` accumulator, combines each
step's block into it elementwise, and reduces the accumulator after the loop. argmax/argmin carry
(value, index) pairs; indices are linear in the reduction range (`rindex`).

`welford_reduce` gives (mean, m2, weight). Persistent: the block holds the whole row, so the mean
(of the row shifted by its first element: equal values give m2 exactly 0, as eager's Welford does)
and then the squared deviations from it are reduced directly (sums over registers, one read of
memory). Looped: each lane of an `[XBLOCK, RBLOCK]` block keeps a running Welford triple; after the
loop the lanes are merged exactly with `tl.sum` (weighted mean of the lane means; m2 plus the lanes'
spread around it), the closed form of Chan's pairwise combine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from codegen_triton.codegen.values import TritonValue, compute_dtype, triton_type, wrapped_in_int32

if TYPE_CHECKING:
    from codegen_triton.codegen.kernel import KernelWriter

__all__ = ["emit_reduction", "emit_welford", "emit_welford_combine"]

_COMBINE = {"prod": "helpers.prod_combine", "max": "helpers.max_combine", "min": "helpers.min_combine"}
_ARG_COMBINE = {"argmax": "helpers.argmax_combine", "argmin": "helpers.argmin_combine"}
# An index that loses every tie against a real one.
_FAR_INDEX = "9223372036854775807"


def _full_block(writer: KernelWriter, value: TritonValue) -> str:
    return f"tl.broadcast_to({value.name}, {writer.shape(frozenset({'x', 'r'}))})"


_NARROW_INTS = (torch.int8, torch.uint8, torch.int16)


def _reduce_block(kind: str, block: str, dtype: torch.dtype | None = None) -> str:
    """Source reducing an `[XBLOCK, RBLOCK]` block along r, keeping an `[XBLOCK, 1]` shape.

    `tl.sum` of a narrow integer type sums in int32: cast back to `dtype` (a sum of int8 wraps in
    eager, and a value of `dtype` in the kernel must hold a value of it)."""
    if kind == "sum":
        if dtype in (torch.int8, torch.int16):  # wrapped, held in int32
            return f"({wrapped_in_int32(f'tl.sum({block}, 1)', dtype)})[:, None]"
        if dtype in _NARROW_INTS:
            return f"tl.sum({block}, 1).to({triton_type(dtype)})[:, None]"
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
        return writer.emit(_reduce_block(kind, block.name, acc_dtype), dtype, x_axes)
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
    finish.lines.append(f"{result.name} = {_reduce_block(kind, acc, acc_dtype)}")
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


def emit_welford(writer: KernelWriter, dtype: torch.dtype, value: TritonValue) -> tuple[TritonValue, TritonValue, TritonValue]:
    """Write a one-pass Welford reduction of `value`; returns `[XBLOCK, 1]` (mean, m2, weight).

    Sibling nodes reducing the same value in the same scope share one reduction.
    """
    key = f"{writer.scope_name}:{value.name}:{dtype}"
    cached = writer.welford_results.get(key)
    if cached is not None:
        return cached
    acc_dtype = compute_dtype(dtype)
    if value.dtype != acc_dtype:
        value = writer.to_dtype(value, acc_dtype, value.dtype)
    ty = triton_type(acc_dtype)
    both, x_axes = frozenset({"x", "r"}), frozenset({"x"})
    full = writer.shape(both)
    if writer.plan.kind == "persistent":
        block = writer.emit(f"tl.where(rmask, {_full_block(writer, value)}, 0)", acc_dtype, both)
        ones = writer.emit(f"tl.where(tl.broadcast_to(rmask, {full}), 1.0, 0.0).to({ty})", acc_dtype, both)
        weight = writer.emit(f"tl.sum({ones.name}, 1)[:, None]", dtype, x_axes)
        # Eager's Welford mean is NaN from a second infinity on (inf - inf); the sum's is inf.
        infinities = writer.emit(
            f"tl.sum(tl.where(rmask & (({block.name} == float('inf')) | ({block.name} == float('-inf'))), 1, 0), 1)[:, None]",
            torch.int32,
            x_axes,
        )
        # The mean is taken of the row shifted by its first element (when finite): a row of equal
        # values then has exactly that mean and m2 0, as eager's running Welford update gives
        # (the plain sum of three equal float64 values, divided by 3, was off by an ulp: m2 > 0).
        first = writer.emit(f"tl.sum(tl.where(rmask & (rindex == 0), {block.name}, 0), 1)[:, None]", acc_dtype, x_axes)
        shift = writer.emit(f"tl.where({first.name} - {first.name} == 0, {first.name}, 0)", acc_dtype, x_axes)
        shifted = writer.emit(f"tl.sum(tl.where(rmask, {block.name} - {shift.name}, 0), 1)[:, None]", acc_dtype, x_axes)
        mean = writer.emit(
            f"tl.where({infinities.name} >= 2, float('nan'), {shift.name} + {shifted.name} / {weight.name})", dtype, x_axes
        )
        deviation = writer.emit(f"tl.where(rmask, {block.name} - {mean.name}, 0)", acc_dtype, both)
        m2 = writer.emit(f"tl.sum({deviation.name} * {deviation.name}, 1)[:, None]", dtype, x_axes)
        result = (mean, m2, weight)
    else:
        result = _looped_welford(writer, dtype, acc_dtype, value)
    writer.welford_results[key] = result
    return result


def _looped_welford(
    writer: KernelWriter, dtype: torch.dtype, acc_dtype: torch.dtype, value: TritonValue
) -> tuple[TritonValue, TritonValue, TritonValue]:
    init, finish = writer.loop_init, writer.loop_finish
    assert init is not None and finish is not None, "looped reduction outside a loop"
    ty = triton_type(acc_dtype)
    both = frozenset({"x", "r"})
    full = writer.shape(both)
    mean, m2, weight = writer.new_name("_acc_mean"), writer.new_name("_acc_m2"), writer.new_name("_acc_weight")
    for name in (mean, m2, weight):
        init.lines.append(f"{name} = tl.zeros({full}, {ty})")
    step = writer.emit(_full_block(writer, value), acc_dtype, both)
    lines = writer.target.lines
    new_weight, delta, new_mean = writer.new_name("_next"), writer.new_name("_next"), writer.new_name("_next")
    lines.append(f"{new_weight} = {weight} + 1")
    lines.append(f"{delta} = {step.name} - {mean}")
    lines.append(f"{new_mean} = {mean} + {delta} / {new_weight}")
    lines.append(f"{m2} = tl.where(rmask, {m2} + {delta} * ({step.name} - {new_mean}), {m2})")
    lines.append(f"{mean} = tl.where(rmask, {new_mean}, {mean})")
    lines.append(f"{weight} = tl.where(rmask, {new_weight}, {weight})")
    x_axes = frozenset({"x"})
    total, result_mean, spread, result_m2 = (writer.new_name() for _ in range(4))
    finish.lines.append(f"{total} = tl.sum({weight}, 1)[:, None]")
    # Eager's Welford mean is NaN once two lanes hold an infinity (inf - inf); the weighted sum's is inf.
    finish.lines.append(
        f"{result_mean} = tl.where(tl.sum(tl.where(({mean} == float('inf')) | ({mean} == float('-inf')), 1, 0), 1)[:, None]"
        f" >= 2, float('nan'), tl.sum({weight} * {mean}, 1)[:, None] / {total})"
    )
    finish.lines.append(f"{spread} = {mean} - {result_mean}")
    finish.lines.append(f"{result_m2} = tl.sum({m2} + {weight} * {spread} * {spread}, 1)[:, None]")
    for name in (total, result_mean, result_m2):
        writer.outer_names.add(name)
    return TritonValue(result_mean, dtype, x_axes), TritonValue(result_m2, dtype, x_axes), TritonValue(total, dtype, x_axes)


def emit_welford_combine(
    writer: KernelWriter, dtype: torch.dtype, values: tuple[TritonValue, ...]
) -> tuple[TritonValue, TritonValue, TritonValue]:
    """Merge partial (mean, m2, weight) triples (a split Welford's second stage); `[XBLOCK, 1]` results."""
    key = f"{writer.scope_name}:combine:{','.join(v.name for v in values)}:{dtype}"
    cached = writer.welford_results.get(key)
    if cached is not None:
        return cached
    acc_dtype = compute_dtype(dtype)
    values = tuple(v if v.dtype == acc_dtype else writer.to_dtype(v, acc_dtype, v.dtype) for v in values)
    both, x_axes = frozenset({"x", "r"}), frozenset({"x"})
    blocks = [writer.emit(f"tl.where(rmask, {_full_block(writer, v)}, 0)", acc_dtype, both) for v in values]
    target = writer.target
    if writer.plan.kind == "persistent":
        mean, m2, weight = (b.name for b in blocks)
    else:
        init, finish = writer.loop_init, writer.loop_finish
        assert init is not None and finish is not None, "looped reduction outside a loop"
        full, ty = writer.shape(both), triton_type(acc_dtype)
        mean, m2, weight = writer.new_name("_acc_mean"), writer.new_name("_acc_m2"), writer.new_name("_acc_weight")
        for name in (mean, m2, weight):
            init.lines.append(f"{name} = tl.zeros({full}, {ty})")
        step_mean, step_m2, step_weight = (b.name for b in blocks)
        total, ratio, delta = writer.new_name("_next"), writer.new_name("_next"), writer.new_name("_next")
        lines = writer.target.lines
        lines.append(f"{total} = {weight} + {step_weight}")
        lines.append(f"{ratio} = tl.where({total} == 0, 0.0, {step_weight} / tl.where({total} == 0, 1.0, {total}))")
        lines.append(f"{delta} = {step_mean} - {mean}")
        lines.append(f"{m2} = {m2} + {step_m2} + {delta} * {delta} * {weight} * {ratio}")
        lines.append(f"{mean} = {mean} + {delta} * {ratio}")
        lines.append(f"{weight} = {total}")
        target = finish  # the closed-form merge of the lanes follows the loop
    names = [writer.new_name() for _ in range(4)]
    total_name, mean_name, spread, m2_name = names
    target.lines.append(f"{total_name} = tl.sum({weight}, 1)[:, None]")
    target.lines.append(f"{mean_name} = tl.sum({weight} * {mean}, 1)[:, None] / {total_name}")
    target.lines.append(f"{spread} = {mean} - {mean_name}")
    target.lines.append(f"{m2_name} = tl.sum({m2} + {weight} * {spread} * {spread}, 1)[:, None]")
    if writer.plan.kind != "persistent":
        for name in (total_name, mean_name, m2_name):
            writer.outer_names.add(name)
    result = (TritonValue(mean_name, dtype, x_axes), TritonValue(m2_name, dtype, x_axes), TritonValue(total_name, dtype, x_axes))
    writer.welford_results[key] = result
    return result
