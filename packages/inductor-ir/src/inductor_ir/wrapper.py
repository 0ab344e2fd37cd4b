"""Wrapper codegen: the Python module with ``call(args)`` that runs a schedule.

As in the talk's "Output Wrapper": read symbolic sizes from the inputs, allocate buffers with their
strides (or reuse dead ones), launch kernels and extern calls in order, free dead buffers, return
the outputs. Views are ``as_strided`` calls written inline. Kernels are called by their
``KernelSource.name``; those names, ``reinterpret``, ``ensure_layout`` and ``aligned_matmul`` (CUDA
matrix products with misaligned rows) are bound in the module's namespace by :func:`load_wrapper`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sympy
import torch
from torch.utils._sympy.printers import PythonPrinter as TorchPythonPrinter

from inductor_ir.ir.layout import contiguous_strides
from inductor_ir.ir.nodes import Buffer, ExternKernel, InputBuffer, MultiOutput, ReinterpretView
from inductor_ir.matmul_alignment import MatmulPadding, aligned_matmul, matmul_padding
from inductor_ir.scheduler import ExternStep, KernelStep, Schedule
from inductor_ir.storage_check import StorageTracker
from inductor_ir.unbacked import runtime_checks

__all__ = ["ensure_layout", "exec_wrapper", "load_wrapper", "reinterpret", "wrapper_source", "wrapper_source_and_constants"]


def reinterpret(base: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...], offset: int) -> torch.Tensor:
    """A strided view of ``base``'s memory, ``offset`` elements after its data pointer."""
    return torch.as_strided(base, size, stride, base.storage_offset() + offset)


def ensure_layout(result: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...]) -> torch.Tensor:
    """``result`` if it has the expected strides, else a copy with them (fallback ops may differ).

    An empty result where elements were expected is returned as it is: eager's kernel left an
    output it does not need unmaterialized (``_embedding_bag``'s ``offset2bag`` in sum mode on the
    CPU, where the meta function says one per index), and eager's backward takes it so.
    """
    if result.stride() == stride and result.shape == size:
        return result  # the common case, checked first: one comparison per tuple
    if tuple(result.shape) == tuple(size) and all(n == 1 or a == b for n, a, b in zip(size, result.stride(), stride)):
        return result
    if result.numel() == 0 and tuple(result.shape) != tuple(size):
        return result
    out = torch.empty_strided(size, stride, dtype=result.dtype, device=result.device)
    out.copy_(result)
    return out


def _expr(value: Any) -> str:
    """A Python expression for an argument value."""
    if isinstance(value, (sympy.Expr, sympy.logic.boolalg.Boolean)):  # a size, or a returned `u0 > 0`
        return _sym(value)
    if isinstance(value, ReinterpretView):
        if _is_whole_buffer(value):
            return value.data.name
        layout = value.layout
        return _view_expr(value.data.name, layout.size, layout.stride, layout.offset)
    if isinstance(value, Buffer):
        return value.name
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return f"torch.device({str(value)!r})"
    if isinstance(value, torch.memory_format) or isinstance(value, torch.layout):
        return str(value)
    if isinstance(value, float):
        return f"float({str(value)!r})" if value != value or value in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_expr(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_expr(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    raise _Unprintable(value)


def _view_expr(name: str, size: Sequence[Any], stride: Sequence[Any], offset: Any) -> str:
    """``reinterpret(name, ...)`` written inline (a view is made on every call: one Python call fewer)."""
    start = f"{name}.storage_offset()" if sympy.sympify(offset) == 0 else f"{name}.storage_offset() + {_sym(offset)}"
    return f"{name}.as_strided({_tuple(tuple(size))}, {_tuple(tuple(stride))}, {start})"


def _is_whole_buffer(view: ReinterpretView) -> bool:
    """Whether ``view`` is its buffer exactly (same sizes and strides, no offset): no view needed."""
    base = getattr(view.data, "layout", None)
    if base is None or sympy.sympify(view.layout.offset) != 0:
        return False
    return tuple(base.size) == tuple(view.layout.size) and tuple(base.stride) == tuple(view.layout.stride)


class _Unprintable(Exception):
    """A value with no literal form: bound in the namespace instead."""


class _PythonPrinter(sympy.printing.str.StrPrinter):
    """SymPy's string printer with the functions sizes use spelled as Python: ``str`` prints
    ``Max(1, s0 // 4)`` (a strided convolution's output strides), which the wrapper cannot run."""

    def _print_Max(self, expr: sympy.Max) -> str:
        return f"max({', '.join(self._print(a) for a in expr.args)})"

    def _print_Min(self, expr: sympy.Min) -> str:
        return f"min({', '.join(self._print(a) for a in expr.args)})"

    def _print_Float(self, expr: sympy.Float) -> str:  # the double itself (str prints 15 digits)
        return repr(float(expr))

    def _print_FloatTrueDiv(self, expr: sympy.Expr) -> str:  # Python's division of two doubles
        return f"(({self._print(expr.args[0])}) / ({self._print(expr.args[1])}))"

    def _print_Abs(self, expr: sympy.Abs) -> str:  # `abs(n - 3)` of sizes
        return f"abs({self._print(expr.args[0])})"

    def _print_Equality(self, expr: sympy.Eq) -> str:  # runtime checks on unbacked symbols
        return f"({self._print(expr.lhs)} == {self._print(expr.rhs)})"

    def _print_Unequality(self, expr: sympy.Ne) -> str:
        return f"({self._print(expr.lhs)} != {self._print(expr.rhs)})"

    def _print_And(self, expr: sympy.And) -> str:
        return "(" + " and ".join(self._print(a) for a in expr.args) + ")"

    def _print_Or(self, expr: sympy.Or) -> str:
        return "(" + " or ".join(self._print(a) for a in expr.args) + ")"

    def _print_Mod(self, expr: sympy.Mod) -> str:  # Python's % has SymPy's sign convention
        return f"(({self._print(expr.args[0])}) % ({self._print(expr.args[1])}))"

    def _print_Not(self, expr: sympy.Not) -> str:  # str's `~c` is a bitwise not in Python
        return f"(not {self._print(expr.args[0])})"

    def _print_Piecewise(self, expr: sympy.Piecewise) -> str:  # `narrow` by a tensor start's clamped bounds
        text = ""
        for value, condition in reversed(expr.args):
            if condition == sympy.true and not text:
                text = f"({self._print(value)})"
            else:
                text = f"(({self._print(value)}) if ({self._print(condition)}) else {text or 'None'})"
        return text


_PYTHON = _PythonPrinter()


def _sym(expr: Any) -> str:
    expr = sympy.sympify(expr)
    if expr.is_Integer:
        return str(int(expr))
    return f"({_PYTHON.doprint(expr)})"


def _tuple(values: tuple[Any, ...]) -> str:
    return "(" + ", ".join(_sym(v) for v in values) + ("," if len(values) == 1 else "") + ")"


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " + text)

    def device(self, device: Any) -> str:
        """A name bound to ``torch.device(device)`` (parsed once, not on every allocation)."""
        name = "_device_" + re.sub(r"\W", "_", str(device))
        self.constants[name] = torch.device(device)
        return name

    def op(self, op: Any) -> str:
        """A name bound to the op ``torch.ops.<op>`` (looked up once, not on every call)."""
        path = str(op)
        target: Any = op if callable(op) else None
        if target is None:
            try:
                target = torch.ops
                for part in path.split("."):
                    target = getattr(target, part)
            except AttributeError:
                return f"torch.ops.{path}"
        name = "_op_" + re.sub(r"\W", "_", path)
        if self.constants.get(name, target) is not target:
            name = f"{name}_{len(self.constants)}"
        self.constants[name] = target
        return name

    def arg(self, value: Any) -> str:
        try:
            return _expr(value)
        except _Unprintable:
            name = f"_const{len(self.constants)}"
            self.constants[name] = value
            return name


def wrapper_source(schedule: Schedule, kernel_names: Mapping[str, str] | None = None) -> str:
    """The wrapper module's source. ``kernel_names`` maps group name -> kernel name (default: the same)."""
    kernel_names = kernel_names or {}
    source, _ = _generate(schedule, kernel_names)
    return source


def _generate(schedule: Schedule, kernel_names: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    program = schedule.program
    w = _Writer()
    names = []
    for position, item in enumerate(program.graph_inputs):
        names.append(item.name if isinstance(item, InputBuffer) else f"_arg{position}")
    if names:  # a graph with no inputs (arange, zeros, ...) has nothing to unpack
        w.line(", ".join(names) + ("," if len(names) == 1 else "") + " = args")
    w.line("args.clear()")
    for symbol, src in program.size_sources.items():
        if src.buffer:
            continue  # unbacked: read from its buffer after the step that makes it (`_bind_unbacked`)
        target = names[src.position]
        if src.kind in ("size", "stride"):
            w.line(f"{symbol} = {src.solved(f'{target}.{src.kind}({src.dim})')}")
        else:
            w.line(f"{symbol} = {target}")
    unbacked = _UnbackedBindings(program)
    unbacked.check_ready(w)
    reused = {a.reuse for s in schedule.memory.steps for a in s.allocations if a.reuse and not a.in_place}
    # Every kernel call is checked to pass distinct memories (its arguments are `__restrict__`).
    storages = StorageTracker()
    for step, memory in zip(schedule.steps, schedule.memory.steps):
        after: list[str] = []
        for alloc in memory.allocations:
            rec = alloc.record
            if alloc.reuse is None:
                storages.fresh(rec.name)
            else:
                storages.share(rec.name, alloc.reuse)
            if alloc.in_place:
                w.line(f"{rec.name} = {alloc.reuse}  # reuse in place")
                after.append(f"del {alloc.reuse}")
            elif alloc.reuse is not None:
                w.line(f"{rec.name} = {alloc.reuse}; del {alloc.reuse}  # reuse")
            else:
                w.line(
                    f"{rec.name} = empty_strided({_tuple(rec.size)}, {_tuple(rec.stride)}, "
                    f"device={w.device(rec.device)}, dtype={rec.dtype})"
                )
        if isinstance(step, KernelStep):
            group = step.group
            kernel = kernel_names.get(group.name, group.name)
            tensors = [r.name for r in group.inputs] + [r.name for r in group.outputs]
            storages.check_call(kernel, tensors)
            w.line(f"{kernel}({', '.join(tensors + [str(s) for s in group.size_symbols])})")
        else:
            _extern_lines(w, step, unbacked)
        for text in after:
            w.line(text)
        for name in memory.frees:
            if name not in reused:
                w.line(f"del {name}")
    outs = _output_exprs(w, program.outputs)
    w.line("return (" + ", ".join(outs) + ("," if len(outs) == 1 else "") + ")")
    header = [
        "# Generated by inductor_ir: the wrapper that runs one compiled graph.",
        "import torch",
        "from torch import empty_strided",
        "",
        "",
        "def call(args):",
    ]
    return "\n".join(header + w.lines) + "\n", w.constants


def _output_exprs(w: _Writer, outputs: Sequence[Any]) -> list[str]:
    """The returned values; a whole-buffer view is the buffer itself, unless that buffer is
    returned twice (distinct outputs stay distinct tensor objects, as before)."""
    names = [o.data.name if isinstance(o, ReinterpretView) else getattr(o, "name", None) for o in outputs]
    exprs = []
    for output, name in zip(outputs, names):
        if isinstance(output, ReinterpretView) and _is_whole_buffer(output) and names.count(name) > 1:
            assert isinstance(name, str)
            layout = output.layout
            exprs.append(_view_expr(name, layout.size, layout.stride, layout.offset))
        elif isinstance(output, (int, float)) and not isinstance(output, bool):
            exprs.append(repr(output))
        else:
            exprs.append(w.arg(output))
    return exprs


class _UnbackedBindings:
    """Binds the unbacked symbols (``u0 = buf3.size(0)``) right after the steps that make them, and
    runs each runtime check (``u0 >= 0``, the graph's ``torch._check(u0 <= 8)``) once all its symbols
    are bound: those on input sizes alone at the start (``check_ready``)."""

    def __init__(self, program: Any) -> None:
        self.by_buffer: dict[str, list[tuple[sympy.Symbol, Any]]] = {}
        for symbol, src in program.size_sources.items():
            if src.buffer:
                self.by_buffer.setdefault(src.buffer, []).append((symbol, src))
        self.bound = {s for s, src in program.size_sources.items() if not src.buffer}
        self.checks = runtime_checks(program) if self.by_buffer or program.runtime_asserts else []

    def defines(self, name: str) -> bool:
        return name in self.by_buffer

    def bind(self, w: _Writer, name: str) -> None:
        for symbol, src in self.by_buffer.get(name, ()):
            read = {"item": name, "python": src.python}.get(src.kind, f"{name}.{src.kind}({src.dim})")
            w.line(f"{symbol} = {read}")
            self.bound.add(symbol)
        self.check_ready(w)

    def check_ready(self, w: _Writer) -> None:
        """Write the checks whose symbols are all bound now."""
        remaining = []
        for symbols, expr in self.checks:
            if symbols <= self.bound:
                # Eager raises inside the op (a negative size, split sizes that do not add up) or from
                # `torch._check`; the compiled kernels would read out of bounds or return a result
                # instead: raise before they run.
                text = f"a data-dependent size or value broke a check of the compiled graph: {expr} is false"
                values = ", ".join(f"{s} = {{{s}}}" for s in sorted(symbols, key=str))
                message = text + (f" ({values})" if values else "")
                w.line(f"if not ({TorchPythonPrinter().doprint(expr)}): raise RuntimeError(f{message!r})")
            else:
                remaining.append((symbols, expr))
        self.checks = remaining


def _extern_lines(w: _Writer, step: ExternStep, unbacked: _UnbackedBindings) -> None:
    buf = step.buffer
    binds = unbacked.defines(buf.name)
    if isinstance(buf, MultiOutput):
        path = "".join(f"[{k}]" for k in buf.path)
        layout = buf.layout
        if binds:  # its sizes are the unbacked symbols: read them before checking its layout
            w.line(f"{buf.name} = {buf.parent}{path}")
            unbacked.bind(w, buf.name)
            w.line(f"{buf.name} = ensure_layout({buf.name}, {_tuple(layout.size)}, {_tuple(layout.stride)})")
            return
        w.line(f"{buf.name} = ensure_layout({buf.parent}{path}, {_tuple(layout.size)}, {_tuple(layout.stride)})")
        return
    assert isinstance(buf, ExternKernel)
    args = [w.arg(a) for a in buf.args] + [f"{k}={w.arg(v)}" for k, v in buf.kwargs.items()]
    function = _PUBLIC_FUNCTIONS.get(buf.op)
    call = f"{function or w.op(buf.op)}({', '.join(args)})"
    padding = _matmul_padding(buf)
    if padding is not None:
        name = f"_matmul_padding_{len(w.constants)}"
        w.constants[name] = padding
        call = f"aligned_matmul({w.op(buf.op)}, {name}, {', '.join(args)})"
    elif not binds and _returns_row_major(buf):
        # A structured matmul allocates its result row-major: no layout check, and the public function
        # (its Python binding parses arguments faster than an OpOverload call).
        w.line(f"{buf.name} = {_ROW_MAJOR_MATMULS[buf.op]}({', '.join(args)})")
        return
    if buf.output_is_tuple:
        w.line(f"{buf.name} = {call}")
        unbacked.bind(w, buf.name)
    elif binds:
        layout = buf.layout
        w.line(f"{buf.name} = {call}")
        unbacked.bind(w, buf.name)
        w.line(f"{buf.name} = ensure_layout({buf.name}, {_tuple(layout.size)}, {_tuple(layout.stride)})")
    else:
        layout = buf.layout
        w.line(f"{buf.name} = ensure_layout({call}, {_tuple(layout.size)}, {_tuple(layout.stride)})")


# Ops called through their public function, whose Python binding parses arguments faster than an
# `OpOverload` call (the same ATen op and schema, one overload taking these arguments; the result's
# layout is still checked): a small convolution on CPU, 11.3 -> 4.5 us per call.
_PUBLIC_FUNCTIONS: dict[Any, str] = {
    torch.ops.aten.convolution.default: "torch.convolution",
    torch.ops.aten._scaled_dot_product_flash_attention.default: "torch._scaled_dot_product_flash_attention",
    torch.ops.aten._scaled_dot_product_efficient_attention.default: "torch._scaled_dot_product_efficient_attention",
    torch.ops.aten._scaled_dot_product_cudnn_attention.default: "torch._scaled_dot_product_cudnn_attention",
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default: "torch._scaled_dot_product_flash_attention_for_cpu",
}

# ATen's matmuls that always return a new row-major tensor (structured kernels: the result is allocated
# with contiguous strides whatever the operands' layouts), by the public function computing the same op.
_ROW_MAJOR_MATMULS: dict[Any, str] = {
    torch.ops.aten.mm.default: "torch.mm",
    torch.ops.aten.bmm.default: "torch.bmm",
    torch.ops.aten.addmm.default: "torch.addmm",
    torch.ops.aten.baddbmm.default: "torch.baddbmm",
}


def _returns_row_major(buf: ExternKernel) -> bool:
    """Whether ``buf`` is a matmul whose recorded layout is the row-major one ATen returns."""
    if buf.op not in _ROW_MAJOR_MATMULS or buf.output_is_tuple:
        return False
    layout = buf.layout
    strides = contiguous_strides(layout.size)
    return all(sympy.sympify(n) == 1 or sympy.sympify(a) == sympy.sympify(b) for n, a, b in zip(layout.size, layout.stride, strides))


def _static(values: Sequence[Any]) -> tuple[int, ...] | None:
    exprs = [sympy.sympify(v) for v in values]
    return tuple(int(e) for e in exprs) if all(e.is_Integer for e in exprs) else None


def _matmul_padding(buf: ExternKernel) -> MatmulPadding | None:
    """The padding a CUDA matrix product with misaligned rows gets (see ``matmul_alignment.py``)."""
    if not str(buf.layout.device).startswith("cuda") or buf.output_is_tuple or buf.kwargs.keys() - {"beta", "alpha"}:
        return None
    name = getattr(getattr(buf.op, "_schema", None), "name", "").split("::")[-1]
    operands: list[tuple[tuple[int, ...], tuple[int, ...]] | None] = []
    for arg in buf.args:
        layout = getattr(arg, "layout", None) if isinstance(arg, (Buffer, ReinterpretView)) else None
        size = _static(layout.size) if layout is not None else None
        stride = _static(layout.stride) if layout is not None else None
        operands.append((size, stride) if size is not None and stride is not None else None)
    output_size = _static(buf.layout.size)
    if output_size is None:
        return None
    return matmul_padding(name, operands, output_size, buf.layout.dtype)


def load_wrapper(schedule: Schedule, kernels: Mapping[str, Callable[..., None]], kernel_names: Mapping[str, str]) -> tuple[Callable[[list[Any]], Any], str]:
    """Generate the wrapper, execute it with the kernels and constants bound, and return ``(call, source)``."""
    source, constants = wrapper_source_and_constants(schedule, kernel_names)
    return exec_wrapper(source, constants, kernels), source


def wrapper_source_and_constants(
    schedule: Schedule, kernel_names: Mapping[str, str]
) -> tuple[str, dict[str, Any]]:
    """The wrapper's source and every name it needs bound besides the kernels and helpers: the
    program's constant tensors, devices, ops and unprintable arguments (what `exec_wrapper` takes)."""
    source, constants = _generate(schedule, kernel_names)
    return source, {**schedule.program.constants, **constants}


def exec_wrapper(source: str, constants: Mapping[str, Any], kernels: Mapping[str, Callable[..., None]]) -> Callable[[list[Any]], Any]:
    """Execute a wrapper's source with its constants, kernels and helpers bound; its ``call(args)``."""
    namespace: dict[str, Any] = {"reinterpret": reinterpret, "ensure_layout": ensure_layout, "aligned_matmul": aligned_matmul,
                                 "math": math}  # ints computed from `item()` floats: `math.trunc(zuf0)`
    namespace.update(constants)
    namespace.update(kernels)
    code = compile(source, "<inductor_ir wrapper>", "exec")
    exec(code, namespace)
    return namespace["call"]  # type: ignore[no-any-return]
