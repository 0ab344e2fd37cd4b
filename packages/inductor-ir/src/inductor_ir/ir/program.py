"""`Program`: the lowered graph (inputs, buffers in order, outputs) and its printed form."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy
import torch

from inductor_ir.ir.dtypes import DtypeHandler, DtypeRuleError
from inductor_ir.ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternKernel,
    FallbackKernel,
    InputBuffer,
    MultiOutput,
    Pointwise,
    ReinterpretView,
)
from inductor_ir.ir.tracing import trace_body
from inductor_ir.ops_handler import set_ops_handler
from inductor_ir.symbolic import index_symbol

__all__ = ["Program", "SizeSource", "format_buffer"]


@dataclass(frozen=True)
class SizeSource:
    """Where the wrapper reads a size symbol: ``input[position].size(dim)`` / ``.stride(dim)``, or a SymInt input.

    An unbacked symbol (``u0``, a size or value only the data gives) names the ``buffer`` whose
    result gives it instead (``buf3.size(0)``; kind ``"item"``: the buffer is ``item()``'s number;
    kind ``"python"``: the Python expression ``python`` over symbols bound before, such as
    ``math.trunc(zuf0)``), read right after that buffer's step; ``position`` is then -1.
    A symbol an input gives only inside a size or stride (``s + 1``: the diagonal of a tensor whose
    rows step ``s``) is solved from it: ``python`` is then ``((value) - 1) // 1`` with ``{read}``
    standing for the value read.
    """

    position: int
    kind: str  # "size", "stride", "scalar" or (from a buffer) "item", "python" (the text `python`)
    dim: int = 0
    buffer: str = ""
    python: str = ""  # kind "python": the expression; "size"/"stride": one of `{read}` (the value read)

    def solved(self, read: str) -> str:
        """The Python expression of the symbol from `read`, the text reading a size or stride."""
        return self.python.format(read=read) if self.python else read


@dataclass(slots=True, eq=False)
class Program:
    """A lowered graph.

    graph_inputs: one entry per placeholder: an ``InputBuffer`` for tensors, the SymPy expression of
        a SymInt input, or ``None`` for other non-tensor inputs.
    buffers: every non-input buffer in creation (a valid execution) order.
    outputs: per graph output: a ``Buffer``, a ``ReinterpretView`` of one, a SymPy expression, or a
        Python constant (``None``, a number).
    constants: tensors of ``get_attr`` nodes by buffer name.
    size_sources: how the wrapper finds each size symbol from the inputs.
    size_hints: a concrete value per size symbol (from the example inputs), for heuristics.
    output_spec: the pytree spec of the graph's output structure (``outputs`` is its flat leaves).
    lowering_errors: lowerings that crashed (their ops ran as fallbacks instead); empty when healthy.
    shape_env: the ShapeEnv of the graph's unbacked symbols (None without them): its runtime
        assertions on them are checked by the wrapper (see ``unbacked.py``).
    runtime_asserts: the conditions of the graph's ``aten._assert_scalar`` nodes (a ``torch._check``
        on an ``item()`` value), in torch's SymPy functions: the wrapper raises where one is false.
    """

    graph_inputs: list[InputBuffer | sympy.Expr | None] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    constants: dict[str, torch.Tensor] = field(default_factory=dict)
    size_sources: dict[sympy.Symbol, SizeSource] = field(default_factory=dict)
    size_hints: dict[sympy.Symbol, int] = field(default_factory=dict)
    output_spec: Any = None
    lowering_errors: list[str] = field(default_factory=list)
    shape_env: Any = None
    runtime_asserts: list[sympy.Basic] = field(default_factory=list)
    _by_name: tuple[int, dict[str, Buffer]] | None = field(default=None, repr=False)

    def buffer(self, name: str) -> Buffer:
        """The input or computed buffer called ``name``."""
        index = self._index()
        if name in index:
            return index[name]
        for buf in self.buffers:
            if buf.name == name:
                return buf
        for item in self.graph_inputs:
            if isinstance(item, InputBuffer) and item.name == name:
                return item
        for item in self.constant_buffers():
            if item.name == name:
                return item
        raise KeyError(name)

    def _index(self) -> dict[str, Buffer]:
        cached = self._by_name
        if cached is None or cached[0] != len(self.buffers):
            table: dict[str, Buffer] = {b.name: b for b in self.input_buffers()}
            table.update((b.name, b) for b in self.buffers)
            self._by_name = cached = (len(self.buffers), table)
        return cached[1]

    def input_buffers(self) -> list[InputBuffer]:
        """Tensor inputs, in placeholder order."""
        return [item for item in self.graph_inputs if isinstance(item, InputBuffer)]

    def constant_buffers(self) -> list[InputBuffer]:
        """Buffers of constant tensors."""
        return [b for b in self.buffers if isinstance(b, InputBuffer)]

    def hint(self, expr: sympy.Expr | int) -> int:
        """A concrete value of a size expression, using the example inputs' sizes."""
        value = sympy.sympify(expr).xreplace(self.size_hints)
        return int(value)

    def check(self) -> None:
        """Verify the IR's invariants; raises ``AssertionError`` naming the first broken one.

        Names are unique; each computed buffer's ranges match its layout, its body loads only
        inputs, constants and earlier buffers, by ops in the closed vocabulary, and keeps the
        vocabulary's dtype rules (:class:`~inductor_ir.ir.dtypes.DtypeHandler`); extern and fallback
        calls and their picked outputs read only inputs, constants and earlier buffers; every output
        is defined.
        """
        seen = {b.name for b in self.input_buffers()}
        dtypes = {b.name: b.layout.dtype for b in (*self.input_buffers(), *self.buffers)}
        for buf in self.buffers:
            assert buf.name not in seen, f"buffer {buf.name} defined twice"
            if isinstance(buf, ComputedBuffer):
                data = buf.data
                assert len(data.ranges) == len(buf.layout.size), f"{buf.name}: ranges {data.ranges} vs {buf.layout}"
                index = [index_symbol("i", k) for k in range(len(data.ranges))]
                if isinstance(data, Pointwise):
                    trace = trace_body(buf.store_pointwise, index, text=False)
                else:
                    rindex = [index_symbol("r", k) for k in range(len(data.reduction_ranges))]
                    trace = trace_body(buf.store_reduction, index, rindex, text=False)
                for dep in trace.deps.reads:
                    assert dep.name in seen, f"{buf.name} loads {dep.name} before it is defined"
                assert [d.name for d in trace.deps.writes] == [buf.name], f"{buf.name} must store itself once"
                with set_ops_handler(DtypeHandler(dtypes)):
                    try:
                        if isinstance(data, Pointwise):
                            buf.store_pointwise(index)
                        else:
                            buf.store_reduction(index, rindex)
                    except DtypeRuleError as error:
                        raise AssertionError(f"{buf.name} ({', '.join(data.origins)}): {error}") from None
            elif isinstance(buf, (ExternKernel, MultiOutput)):
                for name in buf.read_names():
                    assert name in seen, f"{buf.name} reads {name} before it is defined"
            seen.add(buf.name)
        for out in self.outputs:  # SymPy expressions (sizes, ``item()``'s numbers) and constants have no buffer
            output: str | None = out.data.name if isinstance(out, ReinterpretView) else None
            if isinstance(out, Buffer):
                output = out.name
            assert output is None or output in seen, f"output {output} is not defined"

    def __str__(self) -> str:
        parts = [format_buffer(item) for item in self.graph_inputs if isinstance(item, InputBuffer)]
        parts += [format_buffer(buf) for buf in self.buffers]
        outs = ", ".join(_output_name(o) for o in self.outputs)
        parts.append(f"return ({outs})")
        return "\n\n".join(parts)


def _output_name(value: Any) -> str:
    if isinstance(value, Buffer):
        return value.name
    if isinstance(value, ReinterpretView):
        return f"view({value.data.name}, {value.layout})"
    return repr(value)


def format_buffer(buf: Buffer) -> str:
    """The printed form of one buffer, like the talk's ``ComputedBuffer(name='buf0', ...)`` example."""
    if isinstance(buf, ComputedBuffer):
        data = buf.data
        ranges = ", ".join(str(r) for r in data.ranges)
        if isinstance(data, Pointwise):
            index = [index_symbol("i", k) for k in range(len(data.ranges))]
            trace = trace_body(data.inner_fn, index, indent="    ")
            header = f"def inner_fn_{buf.name}(index):\n    {_unpack(index, 'index')}"
            kind = f"Pointwise(inner_fn=inner_fn_{buf.name}, ranges=[{ranges}])"
        else:
            index = [index_symbol("i", k) for k in range(len(data.ranges))]
            rindex = [index_symbol("r", k) for k in range(len(data.reduction_ranges))]
            trace = trace_body(data.inner_fn, index, rindex, indent="    ")
            header = (
                f"def inner_fn_{buf.name}(index, rindex):\n    {_unpack(index, 'index')}\n    {_unpack(rindex, 'rindex')}"
            )
            rranges = ", ".join(str(r) for r in data.reduction_ranges)
            kind = (
                f"Reduction(inner_fn=inner_fn_{buf.name}, ranges=[{ranges}], reduction_ranges=[{rranges}], "
                f"reduction_type={data.reduction_type!r})"
            )
        body = "\n".join([header, *trace.lines])
        return f"{body}\n{buf.name} = ComputedBuffer(name={buf.name!r}, layout={buf.layout}, data={kind})"
    if isinstance(buf, InputBuffer):
        return f"{buf.name} = InputBuffer(name={buf.name!r}, layout={buf.layout}, kind={buf.kind!r})"
    if isinstance(buf, ExternKernel):
        cls = "FallbackKernel" if isinstance(buf, FallbackKernel) else "ExternKernel"
        reads = ", ".join(buf.read_names())
        return f"{buf.name} = {cls}({buf.op}, reads=[{reads}], layout={buf.layout})"
    if isinstance(buf, MultiOutput):
        return f"{buf.name} = MultiOutput({buf.parent}{list(buf.path)}, layout={buf.layout})"
    return f"{buf.name} = {buf!r}"


def _unpack(symbols: list[sympy.Symbol], name: str) -> str:
    if not symbols:
        return f"() = {name}"
    return ", ".join(str(s) for s in symbols) + (" = " if len(symbols) > 1 else ", = ") + name
