"""The define-by-run IR: layouts, nodes, programs, and the tracing handler."""

from inductor_ir.ir.checks import DivisionCheck, IndexCheck, RuntimeCheck, failed_check
from inductor_ir.ir.dtypes import DtypeHandler, DtypeRuleError
from inductor_ir.ir.layout import Layout, contiguous_strides
from inductor_ir.ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternKernel,
    FallbackKernel,
    IndexView,
    InputBuffer,
    IRNode,
    MultiOutput,
    Pointwise,
    Reduction,
    ReinterpretView,
)
from inductor_ir.ir.program import Program, SizeSource, format_buffer
from inductor_ir.ir.tracing import MemoryDep, ReadsWrites, TracingHandler, trace_body

__all__ = [
    "Buffer",
    "ComputedBuffer",
    "DivisionCheck",
    "DtypeHandler",
    "DtypeRuleError",
    "ExternKernel",
    "FallbackKernel",
    "IRNode",
    "IndexCheck",
    "IndexView",
    "InputBuffer",
    "Layout",
    "MemoryDep",
    "MultiOutput",
    "Pointwise",
    "Program",
    "ReadsWrites",
    "Reduction",
    "ReinterpretView",
    "RuntimeCheck",
    "SizeSource",
    "TracingHandler",
    "contiguous_strides",
    "failed_check",
    "format_buffer",
    "trace_body",
]
