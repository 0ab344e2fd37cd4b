"""Readable dumps for debugging: kernel group records, schedules, and every artifact of a compile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inductor_ir.backend import BufferRecord, KernelGroup
from inductor_ir.ir.tracing import trace_body

__all__ = ["describe_group", "dump_artifacts"]


def _record(record: BufferRecord) -> str:
    dtype = str(record.dtype).removeprefix("torch.")
    size = "(" + ", ".join(str(s) for s in record.size) + ("," if len(record.size) == 1 else "") + ")"
    stride = "(" + ", ".join(str(s) for s in record.stride) + ("," if len(record.stride) == 1 else "") + ")"
    return f"{record.name} {dtype} size={size} stride={stride} offset={record.offset}"


def _records(title: str, records: tuple[BufferRecord, ...]) -> list[str]:
    if not records:
        return [f"  {title:<9} -"]
    lines = [f"  {title:<9} {_record(records[0])}"]
    lines += [f"  {'':<9} {_record(r)}" for r in records[1:]]
    return lines


def _sizes(sizes: tuple[Any, ...]) -> str:
    return "(" + ", ".join(str(s) for s in sizes) + ("," if len(sizes) == 1 else "") + ")"


def describe_group(group: KernelGroup) -> str:
    """A readable description of a ``KernelGroup``: iteration space, buffers, each node's ops.

    Example output (the talk's sin -> cos)::

        group fused_sin_cos_0 on cpu: pointwise_size=(8, 16) reduction_size=()
          inputs:   arg0_1 float32 size=(8, 16) stride=(16, 1) offset=0
          ...
    """
    lines = [
        f"group {group.name} on {group.device}: pointwise_size={_sizes(group.pointwise_size)} "
        f"reduction_size={_sizes(group.reduction_size)}"
    ]
    lines += _records("inputs:", group.inputs)
    lines += _records("outputs:", group.outputs)
    lines += _records("internal:", group.internal)
    if group.in_place:
        lines.append(f"  {'in place:':<9} " + ", ".join(f"{b.output} over {b.input.name}" for b in group.in_place))
    lines.append(f"  {'sizes:':<9} " + (", ".join(str(s) for s in group.size_symbols) or "-"))
    xs, rs = group.make_index_vars()
    for node in group.nodes:
        where = f"inside reduction loop {node.loop}" if node.in_reduction_loop else f"after loop {node.loop}"
        if not group.is_reduction:
            where = "no reduction loop"
        origins = ", ".join(node.origins) or "?"
        lines.append(f"  node {node.name} ({node.kind}, {where}) from {origins}:")
        trace = trace_body(node.body, xs, rs if node.in_reduction_loop else (), indent="      ")
        lines += trace.lines
    return "\n".join(lines)


def dump_artifacts(folder: str | Path, artifacts: dict[str, str]) -> list[Path]:
    """Write each named text artifact (``ir.txt``, ``wrapper.py``, kernels) into ``folder``."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in artifacts.items():
        target = path / name
        target.write_text(text)
        written.append(target)
    return written
