"""`KernelWriter`: the Triton ops handler that turns a fused group's node bodies into kernel lines.

It is installed with `set_ops_handler` while each node's `body(index_vars, reduction_vars)` runs; each
`ops.*` call writes one line of Triton (`tmpN = ...`), reusing an equal earlier line (CSE). Memory
ops, masks, reductions and scopes live here; arithmetic and math in `TritonMathOps`.

Scopes: code before, between and after reduction loops is the *outer* scope, visible everywhere after
it; a looped reduction's body is its own scope. A value a node stores into a buffer of the group stays
in a register: later nodes read the register, and a looped node that needs a register of an earlier
loop's body recomputes it by running the producer's body again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import sympy
import torch

from codegen_triton.codegen.checks import CheckSite, RuntimeChecks
from codegen_triton.codegen.indexing import AxisDims, collapse_contiguous
from codegen_triton.codegen.overrides import constant_literal
from codegen_triton.codegen.printer import TritonIndexPrinter
from codegen_triton.codegen.values import TritonValue, compute_dtype, is_float, triton_type
from inductor_ir.backend import KernelGroup, KernelNode
from inductor_ir.ir.checks import IndexCheck
from inductor_ir.ops_handler import set_ops_handler

__all__ = ["KernelPlan", "KernelWriter", "workspace_name"]

V = TritonValue
_BLOCKS = {"x": "XBLOCK", "y": "YBLOCK", "r": "RBLOCK"}
_TEMPORARIES = re.compile(r"\b(?:tmp|_acc|_next)\w*\b")
_REDUCTION_NAMES = re.compile(r"\b(?:rindex|rmask|roffset|rbase|rsplit|rstart|r\d+)\b")


def workspace_name(buffer: str) -> str:
    """The workspace holding a split reduction's partial results for `buffer`, as a buffer name."""
    return f"ws__{buffer}"


@dataclass(frozen=True)
class KernelPlan:
    """How a group becomes a kernel.

    Attributes:
        kind: "pointwise" (flat XBLOCK), "tiled" (YBLOCK x XBLOCK), "persistent" (one block holds the
            whole reduction) or "looped" (reduction in RBLOCK steps).
        tile_split: for "tiled", how many leading non-trivial pointwise dims go to the y axis.
        use_int64: compute indices in int64 (some size may exceed 2**31 - 1).
        split: for a split reduction's first kernel, how many chunks the reduction range is cut into
            (one program per chunk along grid axis 1); 0 otherwise.
        split_chunk: the length of each chunk (a multiple of every RBLOCK tried).
        hint: for reductions, how the loads walk memory: "inner" (contiguous along the reduction),
            "outer" (contiguous along the outputs only) or "" (neither); it narrows the launch
            configurations worth trying (see `codegen_triton.runtime.autotune.candidate_configs`).
    """

    kind: str
    tile_split: int = 0
    use_int64: bool = False
    split: int = 0
    split_chunk: int = 0
    hint: str = ""


@dataclass
class _Section:
    """Lines at one indentation level, in program order."""

    indent: int
    lines: list[str] = field(default_factory=list)


class KernelWriter(RuntimeChecks):
    """Generates the body of one Triton kernel for a `KernelGroup` under a `KernelPlan`."""

    def __init__(
        self, group: KernelGroup, plan: KernelPlan, runtime_checks: bool = True, interpret: bool = False
    ) -> None:
        """Args: group: the fused group; plan: kernel kind and index width; runtime_checks: assert
        indirect indices in range and integer divisors nonzero (see codegen/checks.py); interpret:
        the kernel runs in Triton's interpreter (bfloat16 conversions go through `libdevice`)."""
        self.group = group
        self.plan = plan
        self.runtime_checks = runtime_checks
        self.interpret = interpret
        self.check_sites: dict[CheckSite, int] = {}
        self.printer = TritonIndexPrinter()
        self.axes: tuple[str, ...] = {
            "pointwise": ("x",),
            "tiled": ("y", "x"),
            "persistent": ("x", "r"),
            "looped": ("x", "r"),
        }[plan.kind]
        self.sections: list[_Section] = []
        self.header = self._new_section(1)
        self.target = self.header
        self._counter = 0
        self._literals: dict[str, bool | int | float] = {}
        self._outer_cse: dict[str, V] = {}
        self._loop_cse: dict[str, V] | None = None
        self._scope: str = "outer"
        self._registers: dict[str, tuple[V, str]] = {}
        self._mask_stack: list[V] = []
        self._recomputing = 0
        self._symbol_axes: dict[sympy.Symbol, frozenset[str]] = {}
        self._loop_init: _Section | None = None
        self._loop_finish: _Section | None = None
        self._producers: dict[str, KernelNode] = {node.name: node for node in group.nodes}
        for record in group.buffers().values():
            triton_type(record.dtype)  # raises a clear error for a dtype Triton cannot load or store
        # Buffer -> pointer argument; an output written in place over an input shares its
        # `in_out_ptr` with that input (one argument: the wrapper never passes one memory twice).
        self.pointers: dict[str, str] = group.pointer_names()
        self.index_vars, self.reduction_vars, self.dims = self._make_dims()
        # Names of values defined outside reduction loops (visible inside every later loop).
        self.outer_names: set[str] = set()
        # welford_reduce results by scope and value: sibling nodes (mean, m2) share one reduction.
        self.welford_results: dict[str, tuple[V, V, V]] = {}
        # Split reductions: reduction buffer -> (workspace pointer argument, dtype).
        self.workspaces: dict[str, tuple[str, torch.dtype]] = {}
        if plan.split:
            reductions = [node for node in group.nodes if node.kind == "reduction"]
            for k, node in enumerate(reductions):
                pointer = f"ws_ptr{k}"
                self.workspaces[node.name] = (pointer, compute_dtype(node.dtype))
                self.pointers[workspace_name(node.name)] = pointer

    # -- structure ----------------------------------------------------------------------------
    def _new_section(self, indent: int) -> _Section:
        section = _Section(indent)
        self.sections.append(section)
        return section

    def _make_dims(self) -> tuple[list[sympy.Expr], list[sympy.Expr], list[AxisDims]]:
        xs, rs = self.group.make_index_vars()
        index_vars: list[sympy.Expr] = []
        live_x: list[tuple[sympy.Symbol, sympy.Expr]] = []
        for var, size in zip(xs, self.group.pointwise_size):
            if size == 1:
                index_vars.append(sympy.Integer(0))
            else:
                index_vars.append(var)
                live_x.append((var, size))
        reduction_vars: list[sympy.Expr] = []
        live_r: list[tuple[sympy.Symbol, sympy.Expr]] = []
        for var, size in zip(rs, self.group.reduction_size):
            if size == 1:
                reduction_vars.append(sympy.Integer(0))
            else:
                reduction_vars.append(var)
                live_r.append((var, size))
        split = self.plan.tile_split if self.plan.kind == "tiled" else 0
        groups = [("y", live_x[:split]), ("x", live_x[split:])] if split else [("x", live_x)]
        if self.group.is_reduction:
            groups.append(("r", live_r))
        dims = []
        for axis, pairs in groups:
            flat = sympy.Symbol(f"{axis}index", integer=True, nonnegative=True)
            dims.append(AxisDims(axis, flat, tuple(v for v, _ in pairs), tuple(s for _, s in pairs)))
            self._symbol_axes[flat] = frozenset({axis})
            for var, _ in pairs:
                self._symbol_axes[var] = frozenset({axis})
        return index_vars, reduction_vars, dims

    def definition_names(self) -> set[str]:
        """Names of the per-dim index variables (defined in the header or loop head)."""
        return {var.name for dims in self.dims for var in dims.variables}

    def dims_of(self, axis: str) -> AxisDims:
        """The dims of block axis `axis`."""
        for dims in self.dims:
            if dims.axis == axis:
                return dims
        raise KeyError(axis)

    def shape(self, axes: frozenset[str]) -> str:
        """The block shape of a value varying along `axes`, e.g. `[XBLOCK, 1]`."""
        return "[" + ", ".join(_BLOCKS[a] if a in axes else "1" for a in self.axes) + "]"

    def region_axes(self) -> frozenset[str]:
        """The axes stores in the current code region cover."""
        if not self.group.is_reduction:
            return frozenset(self.axes)
        return frozenset({"x", "r"}) if self._in_reduction_region else frozenset({"x"})

    _in_reduction_region = False

    def mask_for(self, axes: frozenset[str]) -> str | None:
        """`xmask & rmask`-style mask covering `axes`, or None."""
        parts = [f"{a}mask" for a in self.axes if a in axes]
        return " & ".join(parts) if parts else None

    # -- CSE and emission ---------------------------------------------------------------------
    def _lookup(self, key: str) -> V | None:
        if self._loop_cse is not None and key in self._loop_cse:
            return self._loop_cse[key]
        return self._outer_cse.get(key)

    def new_name(self, prefix: str = "tmp") -> str:
        """A fresh variable name."""
        name = f"{prefix}{self._counter}"
        self._counter += 1
        return name

    def emit(self, expr: str, dtype: torch.dtype, axes: frozenset[str]) -> V:
        """Write `tmpN = expr` (or reuse an equal line in scope); the value it names."""
        found = self._lookup(expr)
        if found is not None:
            return found
        if self._loop_init is not None and self._loop_invariant(expr, axes):
            # Hoisted before the reduction loop instead of being recomputed in every step.
            return self._emit_outer(expr, dtype, axes, self._loop_init)
        value = V(self.new_name(), dtype, axes)
        self.target.lines.append(f"{value.name} = {expr}")
        cache = self._loop_cse if self._loop_cse is not None else self._outer_cse
        cache[expr] = value
        if self._loop_cse is None:
            self.outer_names.add(value.name)
        return value

    # -- indexing -----------------------------------------------------------------------------
    def index(self, expr: sympy.Expr) -> tuple[str, frozenset[str]]:
        """Source and axes of an index expression, contiguous runs rewritten to flat indices."""
        expr = collapse_contiguous(sympy.sympify(expr), self.dims)
        axes: frozenset[str] = frozenset()
        for symbol in expr.free_symbols:
            axes |= self._symbol_axes.get(symbol, frozenset())
        return self.printer.print(expr), axes

    def _broadcast_index(self, text: str, have: frozenset[str], want: frozenset[str]) -> str:
        if want <= have:
            return text
        return f"{text} + tl.zeros({self.shape(want)}, tl.int32)"

    def _current_mask(self, axes: frozenset[str]) -> tuple[str | None, frozenset[str]]:
        parts: list[str] = []
        mask_axes = frozenset(axes)
        block_mask = self.mask_for(axes)
        if block_mask:
            parts.append(block_mask)
        for mask in self._mask_stack:
            parts.append(mask.name)
            mask_axes |= mask.axes
        return (" & ".join(parts) if parts else None), mask_axes

    # -- memory -------------------------------------------------------------------------------
    def load(self, name: str, index: sympy.Expr) -> V:
        """A value of buffer `name` (a register when this kernel computed it)."""
        if name in self._registers:
            return self._register(name)
        if name not in self.pointers:
            raise KeyError(
                f"kernel {self.group.name}: load of {name}, which is neither an input nor computed here"
            )
        record = self.group.buffers()[name]
        if record.numel() == 0:
            # No element of an empty buffer is ever used, but a load at a constant index (an `expand`
            # to size 0, stride 0) has no mask: it would read past the allocation (a null pointer).
            dtype = triton_type(compute_dtype(record.dtype))
            return self.emit(f"tl.full({self.shape(self.region_axes())}, 0, {dtype})", record.dtype, self.region_axes())
        text, axes = self.index(index)
        mask, mask_axes = self._current_mask(axes)
        text = self._broadcast_index(text, axes, mask_axes)
        if not (axes | mask_axes):
            # A load of one element reads through a one-element block pointer, so that every value
            # is a block, as constants are (`tl.full([1], ...)`): tl.load rejects a block mask
            # (a mask made of constants) on a scalar pointer, and Triton's interpreter gives a
            # comparison of two scalars the operands' dtype, so `scalar < scalar` broadcast into a
            # block became float data (numpy bitwise_and on floats).
            text = f"{text} + tl.zeros({self.shape(frozenset())}, tl.int32)"
        axes = axes | mask_axes
        load = f"tl.load({self.pointers[name]} + ({text})"
        if mask:
            load += f", {mask}, other=0"
        load += ")"
        if compute_dtype(record.dtype) != record.dtype:
            load += f".to({triton_type(compute_dtype(record.dtype))})"
        return self.emit(load, record.dtype, axes)

    def _emit_outer(self, expr: str, dtype: torch.dtype, axes: frozenset[str], section: _Section) -> V:
        found = self._outer_cse.get(expr)
        if found is not None:
            return found
        value = V(self.new_name(), dtype, axes)
        section.lines.append(f"{value.name} = {expr}")
        self._outer_cse[expr] = value
        self.outer_names.add(value.name)
        return value

    def _loop_invariant(self, expr: str, axes: frozenset[str]) -> bool:
        """Whether `expr`, written inside a reduction loop, only uses values defined before the loop."""
        if "r" in axes or _REDUCTION_NAMES.search(expr):
            return False
        return all(name in self.outer_names for name in _TEMPORARIES.findall(expr))

    def _register(self, name: str) -> V:
        value, scope = self._registers[name]
        if scope == "outer" or scope == self._scope:
            return value
        producer = self._producers[name]
        # The value was computed in an earlier reduction loop's body: recompute it in this one.
        self._recomputing += 1
        try:
            self.run_node(producer)
        finally:
            self._recomputing -= 1
        return self._registers[name][0]

    def store(self, name: str, index: sympy.Expr, value: V, mode: str | None = None) -> None:
        """Write `value` to buffer `name` (only to a register when the buffer is internal)."""
        self._registers[name] = (value, self._scope)
        if self._recomputing or name not in self.pointers:
            return
        self._write(name, index, value, self.region_axes(), self.target)

    def _write(
        self, name: str, index: sympy.Expr, value: V, region: frozenset[str], section: _Section
    ) -> None:
        record = self.group.buffers()[name]
        text, axes = self.index(index)
        want = region | value.axes
        text = self._broadcast_index(text, axes, want)
        stored = value.name
        if record.dtype != compute_dtype(record.dtype) or compute_dtype(value.dtype) != record.dtype:
            stored = self._convert(stored, record.dtype)
        mask = self.mask_for(want)
        line = f"tl.store({self.pointers[name]} + ({text}), {stored}"
        section.lines.append(line + (f", {mask})" if mask else ")"))

    def _convert(self, text: str, dtype: torch.dtype) -> str:
        """`text` converted to `dtype` for a store. Triton's interpreter truncates float32 to
        bfloat16 where a GPU (and eager) rounds to nearest even: there, `libdevice` rounds."""
        if self.interpret and dtype == torch.bfloat16:
            return f"libdevice.to_bfloat16({text}.to(tl.float32))"
        return f"{text}.to({triton_type(dtype)})"

    def store_reduction(self, name: str, index: sympy.Expr, value: V) -> None:
        """Write a finished reduction (after its loop, in looped kernels)."""
        self._registers[name] = (value, "outer")
        section = self._loop_finish if self._loop_finish is not None else self.target
        if name in self.workspaces and not self._recomputing:
            # A split reduction's first kernel: this chunk's partial result goes to the workspace.
            pointer, dtype = self.workspaces[name]
            stored = (
                value.name
                if compute_dtype(value.dtype) == dtype
                else f"{value.name}.to({triton_type(dtype)})"
            )
            section.lines.append(
                f"tl.store({pointer} + (xindex * {self.plan.split} + rsplit), {stored}, xmask)"
            )
            return
        if self._recomputing or name not in self.pointers:
            return
        self._write(name, index, value, frozenset({"x"}), section)

    def indirect_indexing(
        self, x: V, size: sympy.Expr, check: bool | IndexCheck = True, wrap_neg: bool = True
    ) -> sympy.Symbol:
        """A symbol standing for the integer value `x` (wrapped by `size` where negative), asserted
        to lie in `[0, size)` when `check` (see codegen/checks.py)."""
        value = x
        if wrap_neg:
            size_text = self.printer.print(size)
            value = self.emit(f"tl.where({x.name} < 0, {x.name} + {size_text}, {x.name})", x.dtype, x.axes)
        self.check_index(value, size, check)
        symbol = sympy.Symbol(f"indirect{self._counter}", integer=True)
        self._counter += 1
        self.printer.names[symbol] = value.name
        self._symbol_axes[symbol] = value.axes
        return symbol

    def masked(self, mask: V, body: Callable[[], V], other: bool | int | float) -> V:
        """`body()` where `mask` holds, else `other`; body's loads are masked."""
        self._mask_stack.append(mask)
        try:
            result = body()
        finally:
            self._mask_stack.pop()
        literal = constant_literal(other, compute_dtype(result.dtype))
        return self.emit(
            f"tl.where({mask.name}, {result.name}, {literal})", result.dtype, result.axes | mask.axes
        )

    # -- leaves and casts ---------------------------------------------------------------------
    def constant(self, value: bool | int | float, dtype: torch.dtype) -> V:
        """A scalar constant, as a one-element block."""
        ones = "[" + ", ".join("1" for _ in self.axes) + "]"
        literal = constant_literal(value, dtype)
        expr = f"tl.full({ones}, {literal}, {triton_type(compute_dtype(dtype))})"
        if isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0:
            # tl.full writes +0.0 for any value == 0: a -0.0 is made by negating it.
            expr = f"tl.full({ones}, 0.0, {triton_type(compute_dtype(dtype))}) * -1.0"
        # Constants are written once, in the kernel's header, and shared by every loop.
        result = self._emit_outer(expr, dtype, frozenset(), self.header)
        self._literals[result.name] = value
        return result

    def literal_of(self, value: V) -> bool | int | float | None:
        """The Python value of a constant made by `constant`, else None."""
        return self._literals.get(value.name)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> V:
        """The value of an index expression."""
        text, axes = self.index(expr)
        if not axes:
            ones = "[" + ", ".join("1" for _ in self.axes) + "]"
            if text.lstrip("-").isdigit():
                return self.emit(f"tl.full({ones}, {text}, {triton_type(dtype)})", dtype, axes)
            return self.emit(f"tl.zeros({ones}, {triton_type(dtype)}) + ({text})", dtype, axes)
        return self.emit(f"({text}).to({triton_type(dtype)})", dtype, axes)

    def to_dtype(self, x: V, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> V:
        """Convert like `Tensor.to` (half types are rounded, then held in float32)."""
        if dtype == x.dtype:
            return x
        if dtype == torch.bool:
            return self.emit(f"{x.name} != 0", dtype, x.axes)
        if compute_dtype(dtype) != dtype:
            # Through float32 first, as eager converts to half types (c10::Half/BFloat16 are built
            # from a float): the same rounding for int64/float64 sources, and Triton's interpreter
            # reinterprets the bits of an integer converted straight to bfloat16. On GPU the
            # integer -> float32 -> half conversion is what the hardware does anyway.
            source = x.name if compute_dtype(x.dtype) == torch.float32 else f"{x.name}.to(tl.float32)"
            if self.interpret and dtype == torch.bfloat16:
                return self.emit(f"libdevice.round_to_bfloat16({source})", dtype, x.axes)
            return self.emit(f"{source}.to({triton_type(dtype)}).to(tl.float32)", dtype, x.axes)
        if compute_dtype(x.dtype) == dtype:
            return V(x.name, dtype, x.axes)
        return self.emit(f"{x.name}.to({triton_type(dtype)})", dtype, x.axes)

    def where(self, condition: V, a: V, b: V) -> V:
        """`a` where `condition`, else `b`."""
        return self.emit(
            f"tl.where({condition.name}, {a.name}, {b.name})", a.dtype, condition.axes | a.axes | b.axes
        )

    uses_random = False

    def rand(self, seed: V, offset: V) -> V:
        """Uniform [0, 1) from Philox keyed by `seed` at counter `offset` (`tl.rand`)."""
        self.uses_random = True
        return self.emit(
            f"tl.rand({seed.name}, ({offset.name}).to(tl.uint32))", torch.float32, offset.axes | seed.axes
        )

    def randn(self, seed: V, offset: V) -> V:
        """Standard normal from Philox keyed by `seed` at counter `offset` (`tl.randn`)."""
        self.uses_random = True
        return self.emit(
            f"tl.randn({seed.name}, ({offset.name}).to(tl.uint32))", torch.float32, offset.axes | seed.axes
        )

    # -- reductions ---------------------------------------------------------------------------
    def reduction(self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: V) -> V:
        """Reduce `value` over the reduction range (see `REDUCTION_TYPES`); welford gives a triple."""
        from codegen_triton.codegen.reductions import emit_reduction, emit_welford, emit_welford_combine

        if reduction_type == "welford_reduce":
            return emit_welford(self, dtype, value)  # type: ignore[return-value]
        if reduction_type == "welford_combine":
            return emit_welford_combine(self, dtype, value)  # type: ignore[arg-type, return-value]
        return emit_reduction(self, dtype, src_dtype, reduction_type, value)

    @property
    def scope_name(self) -> str:
        """`outer` or `loopN`: where lines are being written."""
        return self._scope

    # -- driving ------------------------------------------------------------------------------
    def run_node(self, node: KernelNode) -> None:
        """Run one node's body with this writer installed as the ops handler."""
        reduction_vars = self.reduction_vars if node.in_reduction_loop else []
        with set_ops_handler(self):
            node.body(self.index_vars, reduction_vars)

    def enter_loop(self, loop: int) -> _Section:
        """Start reduction loop `loop` (looped kernels): returns the section of its body."""
        self._loop_init = self._new_section(1)
        body = self._new_section(2)
        self._loop_finish = self._new_section(1)
        self._loop_cse = {}
        self._scope = f"loop{loop}"
        self._in_reduction_region = True
        self.target = body
        return body

    def leave_loop(self) -> None:
        """Finish the current reduction loop; later code is in the outer scope."""
        self._loop_cse = None
        self._loop_init = None
        self._loop_finish = None
        self._scope = "outer"
        self._in_reduction_region = False
        self.target = self._new_section(1)

    def set_reduction_region(self, inside: bool) -> None:
        """Persistent kernels: whether the nodes now running iterate over the reduction range."""
        self._in_reduction_region = inside

    @property
    def loop_init(self) -> _Section | None:
        """The accumulator-initialisation section of the current loop (looped kernels)."""
        return self._loop_init

    @property
    def loop_finish(self) -> _Section | None:
        """The section after the current loop (looped kernels)."""
        return self._loop_finish

    def float_identity(self, reduction_type: str, dtype: torch.dtype) -> str:
        """The identity element of a reduction, as a literal."""
        if reduction_type in ("sum", "any"):
            return "0"
        if reduction_type == "prod":
            return "1"
        low = reduction_type in ("max", "argmax")
        if is_float(dtype):
            return 'float("-inf")' if low else 'float("inf")'
        if dtype == torch.bool:
            return "0" if low else "1"
        info = torch.iinfo(dtype)
        return str(info.min if low else info.max)
