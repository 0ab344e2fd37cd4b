"""The C++ `OpsHandler`: every ``ops.*`` call of a node body becomes one line of C++.

The same body runs twice per loop: once through a vector handler (values are ``kiln::f32x``-like
vectors of ``kiln::VEC`` lanes; the vector loop variable holds lane 0's index) and once through a
scalar handler (the scalar tail, and kernels that cannot be vectorized). Values are
:class:`CppValue` records: a C++ variable name and the torch dtype it stands for.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import sympy
import torch

from codegen_cpp.codegen.checks import RuntimeChecks
from codegen_cpp.codegen.dtypes import cpp_constant, cpp_dtype
from codegen_cpp.codegen.lanes import VECTOR_LANES, lane_stride
from codegen_cpp.codegen.printer import cpp_index
from codegen_cpp.codegen.reuse import LoopValueReuse, is_expensive
from codegen_cpp.codegen.values import BodyScope, CppValue, KernelState, Unvectorizable
from inductor_ir.ir.checks import IndexCheck

__all__ = ["BodyScope", "CppOpsHandler", "CppValue", "KernelState", "Unvectorizable"]

_TEMPORARY = re.compile(r"\btmp\d+\b")
# Names a body declares in the loop (KernelState.fresh's prefixes, but for reduction results, which
# are declared after the loop that computes them).
_LOCAL_NAME = re.compile(r"\b(?:tmp|ind|masked|acc)\d+\w*\b")


def _written_pattern(written: frozenset[str] | None) -> re.Pattern[str] | None:
    """What a hoisted expression must not name: the pointers in ``written`` (None: any output pointer)."""
    if written is None:
        return re.compile(r"out_ptr")
    if not written:
        return None
    return re.compile(r"\b(" + "|".join(map(re.escape, sorted(written))) + r")\b")


class CppOpsHandler(RuntimeChecks):
    """Prints one C++ line per op into ``scope``.

    Args:
        state: the kernel's shared state.
        scope: the current body's lines and values.
        vector_var: the index variable of the vector loop (None: scalar code).
        reduction_vars / reduction_sizes: the reduction loop's variables and sizes (for argmax indices).
        node_name: the node whose body runs (names its accumulators).
        hoist_from: the variables of the reduction loops this body runs in (empty: nothing is
            hoisted). A value that depends on none of them is computed once before the loops
            (``scope.pre``, or ``scope.hoisted``), not per vector; see ``_loop_invariant``.
        written: the pointers this kernel writes in or after the loops the body runs in (None: every
            output pointer); a load through one of them is never hoisted.
    """

    def __init__(
        self,
        state: KernelState,
        scope: BodyScope,
        vector_var: sympy.Symbol | None,
        reduction_vars: tuple[sympy.Symbol, ...] = (),
        reduction_sizes: tuple[sympy.Expr, ...] = (),
        node_name: str = "",
        reuse: LoopValueReuse | None = None,
        hoist_from: tuple[str, ...] = (),
        written: frozenset[str] | None = None,
    ) -> None:
        self.state = state
        self.scope = scope
        self.vector_var = vector_var
        self.reduction_vars = reduction_vars
        self.reduction_sizes = reduction_sizes
        self.node_name = node_name
        # Vectorized across pointwise indices ("outer"): reductions keep one lane per index.
        self.outer = vector_var is not None and vector_var not in reduction_vars
        self._reductions_seen = 0
        self._masks: list[str] = []  # vector masks of the enclosing ops.masked calls
        self._masked_depth = 0  # scalar ops.masked blocks entered
        self.reuse = reuse  # set for the in-loop bodies of a vectorized reduction loop
        self._target = scope.lines
        self._loop_variables = re.compile(r"\b(" + "|".join(map(re.escape, hoist_from)) + r")\b") if hoist_from else None
        self._written = _written_pattern(written)

    # ------------------------------------------------------------------ helpers
    @property
    def vector(self) -> bool:
        """Whether values are vectors."""
        return self.vector_var is not None

    def _emit(
        self, expr: str, dtype: torch.dtype, vector: bool | None = None, uniform: str | None = None
    ) -> CppValue:
        vector = self.vector if vector is None else vector
        key = f"{expr}:{dtype}:{vector}"
        hit = self.scope.cse.get(key)
        if hit is not None:
            return hit
        name = self.state.fresh("tmp")
        canonical = _TEMPORARY.sub(lambda m: self.state.canonical.get(m.group(0), m.group(0)), expr)
        if len(canonical) < 4096:
            self.state.canonical[name] = f"({canonical})"
        # Only values of the loop body proper (not under a mask, not after the loop) are shared.
        in_body = self._target is self.scope.lines and not self._masks and self._masked_depth == 0
        if in_body and self._loop_invariant(expr):
            hoisted = self.scope.hoisted if self.scope.hoisted is not None else self.scope.pre
            hoisted.append(f"const auto {name} = {expr};")
            self.state.invariant.add(name)
            value = CppValue(name, dtype, vector, uniform)
            self.scope.cse[key] = value
            return value
        reuse = self.reuse if in_body else None
        if reuse is not None and dtype in (torch.float32, torch.float64) and is_expensive(canonical):
            loaded = reuse.load_instead(canonical, vector)
            if loaded is None:
                reuse.record(canonical, vector, name, dtype, self._target)
            else:
                expr = loaded
        self._target.append(f"auto {name} = {expr};")
        value = CppValue(name, dtype, vector, uniform)
        self.scope.cse[key] = value
        return value

    def _loop_invariant(self, expr: str) -> bool:
        """Whether ``expr`` has the same value in every iteration of the reduction loops the body
        runs in, so it may be computed once before them.

        It names none of the loops' variables, every temporary it reads was itself computed before
        the loops, and it reads no memory this kernel writes in or after these loops (``written``;
        an output an earlier loop finished, such as a BatchNorm's variance, may be read). g++ does
        not hoist such values itself where they come from memory: an RMSNorm backward's per-row
        factor ``rsqrt(mean + eps)`` was loaded, square-rooted and divided in every vector step, and a
        BatchNorm over a channels-last map (vectorized across channels) did the same per element:
        0.43 -> 0.17 ms for one 8x64x16x16 training-mode BatchNorm+ReLU kernel, one thread.
        Loads are hoisted only from loops that run at least once (``hoist_from`` is set for static,
        nonzero reduction ranges only), so they read nothing the loops would not.
        """
        if self._loop_variables is None or self._loop_variables.search(expr):
            return False
        if self._written is not None and self._written.search(expr):
            return False
        return all(name in self.state.invariant for name in _LOCAL_NAME.findall(expr))

    def _splat(self, scalar_expr: str, dtype: torch.dtype) -> str:
        if dtype == torch.bool:
            return f"kiln::splat_mask({scalar_expr})"
        return f"kiln::splat<{cpp_dtype(dtype).vector}>({scalar_expr})"

    def _lift(self, value: CppValue) -> str:
        """A value as the current mode needs it (scalar values are splatted in vector code)."""
        if self.vector and not value.vector:
            return self._splat(value.name, value.dtype)
        if not self.vector and value.vector:
            raise Unvectorizable(f"vector value {value.name} used in scalar code")
        return value.name

    def _lane_lambda(self, index: sympy.Expr, mask: str | None = None) -> str:
        """``[&](int64_t lane) -> int64_t {...}``: ``index`` evaluated for one lane (indirect indices
        checked as they are read, counting the lanes of ``mask`` only: see ``lane_read``)."""
        assert self.vector_var is not None
        body: list[str] = []
        replace: dict[sympy.Symbol, sympy.Symbol] = {}
        if index.has(self.vector_var):
            lane_var = sympy.Symbol(f"{self.vector_var.name}_lane", integer=True, nonnegative=True)
            body.append(f"const int64_t {lane_var.name} = {self.vector_var.name} + lane;")
            replace[self.vector_var] = lane_var
        for symbol, vector_name in self.scope.vector_symbols.items():
            if index.has(symbol):
                lane_symbol = sympy.Symbol(f"{symbol.name}_lane", integer=True, nonnegative=True)
                body.append(f"const int64_t {lane_symbol.name} = {self.lane_read(vector_name, mask)};")
                replace[symbol] = lane_symbol
        body.append(f"return {cpp_index(index.xreplace(replace))};")
        return "[&](int64_t lane) -> int64_t { " + " ".join(body) + " }"

    def _lane_kind(self, index: sympy.Expr) -> str:
        """``"contiguous"``, ``"broadcast"``, ``"strided"`` or ``"gather"``: how ``index`` moves across lanes."""
        stride = self._lane_stride(index)
        if stride is None:
            return "gather"
        if stride == 0:
            return "broadcast"
        return "contiguous" if stride == 1 else "strided"

    def _lane_stride(self, index: sympy.Expr) -> sympy.Expr | None:
        assert self.vector_var is not None
        if any(index.has(s) for s in self.scope.vector_symbols):
            return None
        return lane_stride(index, self.vector_var, VECTOR_LANES)

    def _strided_lambda(self, index: sympy.Expr) -> str:
        """The lane offsets of a constant-stride index, from lane 0's address."""
        stride = self._lane_stride(index)
        return f"[&](int64_t lane) -> int64_t {{ return lane * ({cpp_index(sympy.sympify(stride))}); }}"
        stride = lane_stride(index, self.vector_var, VECTOR_LANES)
        if stride == 0:
            return "broadcast"
        if stride == 1:
            return "contiguous"
        return "gather"

    # ------------------------------------------------------------------ memory
    def load(self, name: str, index: sympy.Expr) -> CppValue:
        """A load: an internal buffer's register, else a vector, broadcast or gathered load."""
        index = sympy.expand(index)
        if self.state.unreadable and index.free_symbols & self.state.unreadable:
            # Through an index into an empty dim, whose check has failed: zeros, no memory access.
            return self.constant(0, self.state.storage[name])
        if name in self.state.internal:
            stored = self.scope.values.get(name) or self.scope.reduced.get(name)
            if stored is None:
                raise RuntimeError(f"internal buffer {name} is read before it is written in this kernel")
            if self.vector and not stored.vector:
                return self._emit(self._splat(stored.name, stored.dtype), stored.dtype, uniform=stored.name)
            if not self.vector and stored.vector:
                raise Unvectorizable(f"{name} is a vector but read in scalar code")
            return stored
        forwarded = self.scope.stored.get(name)
        if forwarded is not None and forwarded[0] == index:
            return forwarded[1]
        dtype = self.state.storage[name]
        pointer = self.state.pointers[name]
        if self.vector and self._masks:
            # Under ops.masked: only lanes whose mask is set may touch memory.
            return self._emit(
                f"kiln::gather_masked({pointer}, {self._lane_lambda(index)}, {self._masks[-1]})", dtype
            )
        if not self.vector:
            return self._plain_load(self._emit(f"kiln::load1({pointer} + {cpp_index(index)})", dtype), name, index)
        kind = self._lane_kind(index)
        if kind == "contiguous":
            return self._plain_load(self._emit(f"kiln::load({pointer} + {cpp_index(index)})", dtype), name, index)
        if kind == "broadcast":
            scalar = self._emit(f"kiln::load1({pointer} + {cpp_index(index)})", dtype, vector=False)
            return self._emit(self._splat(scalar.name, dtype), dtype, uniform=scalar.name)
        if kind == "strided":
            base = f"{pointer} + {cpp_index(index)}"
            return self._emit(f"kiln::gather({base}, {self._strided_lambda(index)})", dtype)
        return self._emit(f"kiln::gather({pointer}, {self._lane_lambda(index)})", dtype)

    def _plain_load(self, value: CppValue, name: str, index: sympy.Expr) -> CppValue:
        """Note that ``value`` is ``name[index]`` read from memory (outside any mask): a reduction
        may then read the row again from there (codegen/reduction.py's row moments)."""
        if not self._masks and self._masked_depth == 0:
            self.state.plain_loads.setdefault(value.name, (name, index))
        return value

    def store(self, name: str, index: sympy.Expr, value: CppValue, mode: str | None = None) -> None:
        """A store: internal buffers stay in registers; outputs are written (scattered if strided)."""
        if mode is not None:
            raise NotImplementedError(f"store mode {mode!r} is not supported by the C++ backend")
        index = sympy.expand(index)
        if name in self.state.internal:
            self.scope.values[name] = value
            return
        if value.vector == self.vector:
            self.scope.stored[name] = (index, value)
        self._write(name, index, value)

    def _write(self, name: str, index: sympy.Expr, value: CppValue) -> None:
        pointer = self.state.pointers[name]
        dtype = self.state.storage[name]
        text = self._lift(value)
        if not self.vector:
            self._target.append(f"kiln::store1({pointer} + {cpp_index(index)}, {text});")
            return
        kind = self._lane_kind(index)
        if kind == "contiguous":
            store = "kiln::store_mask" if dtype == torch.bool else "kiln::store"
            self._target.append(f"{store}({pointer} + {cpp_index(index)}, {text});")
        elif kind == "broadcast":
            raise Unvectorizable(f"store to {name} does not depend on the vector loop")
        elif kind == "strided":
            scatter = "kiln::scatter_mask" if dtype == torch.bool else "kiln::scatter"
            base = f"{pointer} + {cpp_index(index)}"
            self._target.append(f"{scatter}({base}, {text}, {self._strided_lambda(index)});")
        else:
            scatter = "kiln::scatter_mask" if dtype == torch.bool else "kiln::scatter"
            self._target.append(f"{scatter}({pointer}, {text}, {self._lane_lambda(index)});")

    def indirect_indexing(
        self, x: CppValue, size: sympy.Expr, check: bool | IndexCheck = True, wrap_neg: bool = True
    ) -> sympy.Symbol:
        """A symbol for the int64 value of ``x``, wrapped by ``size`` where negative; checked to lie
        in ``[0, size)`` when ``check`` (see codegen/checks.py)."""
        name = self.state.fresh("ind")
        # An index equal in every lane (a broadcast load) stays scalar: loads using it can then
        # be contiguous vector loads instead of gathers.
        vector = self.vector and x.uniform is None
        if self.vector and x.uniform is not None:
            value = x.uniform if x.dtype == torch.int64 else f"static_cast<int64_t>({x.uniform})"
        else:
            value = self._to_int64(x)
        if self._checked_index_line(name, value, size, check, wrap_neg, vector):
            symbol = sympy.Symbol(name, integer=True, nonnegative=True)
            if size.is_Integer and int(size) == 0:
                self.state.unreadable.add(symbol)  # no element to read: loads through it read nothing
            if vector:
                self.scope.vector_symbols[symbol] = name
            return symbol
        if wrap_neg:
            zero = self._splat("0", torch.int64) if vector else "INT64_C(0)"
            size_text = cpp_index(size)
            size_value = self._splat(size_text, torch.int64) if vector else size_text
            self._target.append(
                f"const auto {name} = kiln::where(kiln::lt({value}, {zero}), {value} + {size_value}, {value});"
            )
        else:
            self._target.append(f"const auto {name} = {value};")
        symbol = sympy.Symbol(name, integer=True, nonnegative=True)
        if vector:
            self.scope.vector_symbols[symbol] = name
        return symbol

    def _to_int64(self, x: CppValue) -> str:
        if x.dtype == torch.int64:
            return self._lift(x)
        return self.to_dtype(x, torch.int64, x.dtype).name

    def masked(self, mask: CppValue, body: Callable[[], CppValue], other: bool | int | float) -> CppValue:
        """``body()`` where ``mask`` holds, else ``other``; body's loads run only under the mask.

        Scalar code, and vector code whose mask is the same in every lane (``mask.uniform``: a
        concatenation or ``rotate_half`` at a multiple of ``VEC``, codegen/lanes.py's
        ``lane_uniform_sign``), runs the body in an ``if`` block: inside it every lane is active, so
        its loads are plain vector loads; a vector mask makes per-lane masked loads instead.
        """
        if self.vector and mask.uniform is None:
            return self._masked_vector(mask, body, other)
        inner = BodyScope(
            lines=[],
            pre=self.scope.pre,
            post=self.scope.post,
            values=dict(self.scope.values),
            reduced=self.scope.reduced,
            cse=dict(self.scope.cse),
            vector_symbols=self.scope.vector_symbols,
        )
        saved_scope, saved_target = self.scope, self._target
        self.scope, self._target = inner, inner.lines
        self._masked_depth += 1
        try:
            result = body()
        finally:
            self.scope, self._target = saved_scope, saved_target
            self._masked_depth -= 1
        name = self.state.fresh("masked")
        info = cpp_dtype(result.dtype)
        if self.vector:
            fallback = self._splat(cpp_constant(other, result.dtype), result.dtype)
            self._target.append(f"{info.vector} {name} = {fallback};")
            self._target.append(f"if ({mask.uniform}) {{")
        else:
            self._target.append(f"{info.scalar} {name} = {cpp_constant(other, result.dtype)};")
            self._target.append(f"if ({mask.name}) {{")
        self._target.extend("    " + line for line in inner.lines)
        self._target.append(f"    {name} = {self._lift(result)};")
        self._target.append("}")
        return CppValue(name, result.dtype, self.vector)

    def _masked_vector(
        self, mask: CppValue, body: Callable[[], CppValue], other: bool | int | float
    ) -> CppValue:
        mask_text = self._lift(mask)
        if self._masks:
            mask_text = self._emit(f"({self._masks[-1]} & {mask_text})", torch.bool).name
        self._masks.append(mask_text)
        try:
            result = body()
        finally:
            self._masks.pop()
        fallback = self.constant(other, result.dtype)
        return self.where(CppValue(mask_text, torch.bool, True), result, fallback)

    # ------------------------------------------------------------------ leaves and casts
    def constant(self, value: bool | int | float, dtype: torch.dtype) -> CppValue:
        """A literal (splatted in vector code)."""
        literal = cpp_constant(value, dtype)
        if not self.vector:
            return self._emit(literal, dtype)
        return self._emit(self._splat(literal, dtype), dtype, uniform=literal)

    def index_expr(self, expr: sympy.Expr, dtype: torch.dtype) -> CppValue:
        """An index expression's value as int64/int32 (per lane in vector code)."""
        expr = sympy.expand(expr)
        if not self.vector:
            text = f"static_cast<{cpp_dtype(dtype).scalar}>({cpp_index(expr)})"
            return self._emit(text, dtype)
        kind = self._lane_kind(expr)
        if kind == "broadcast":
            text = self._splat(cpp_index(expr), torch.int64)
        elif kind == "contiguous":
            text = f"kiln::iota<kiln::i64x>({cpp_index(expr)})"
        else:
            # Every lane is evaluated: under ops.masked only the active ones may fail a check.
            mask = self._masks[-1] if self._masks else None
            text = f"kiln::lanes<kiln::i64x>({self._lane_lambda(expr, mask)})"
        value = self._emit(text, torch.int64)
        if dtype != torch.int64:
            return self.to_dtype(value, dtype, torch.int64)
        return value

    def to_dtype(self, x: CppValue, dtype: torch.dtype, src_dtype: torch.dtype | None = None) -> CppValue:
        """Convert like ``Tensor.to``: bool is ``!= 0``, 16-bit floats round, narrow ints wrap."""
        src = x.dtype
        if src == dtype:
            return x
        text = self._lift(x)
        target = cpp_dtype(dtype)
        source = cpp_dtype(src)
        if self.vector:
            if dtype == torch.bool:
                expr = f"kiln::to_mask({text})"
            elif src == torch.bool:
                expr = f"kiln::mask_to<{target.vector}>({text})"
            elif target.vector == source.vector:
                expr = text
            elif src.is_floating_point and dtype == torch.int64:
                expr = f"kiln::float_to_int64({text})"
            elif src.is_floating_point and not dtype.is_floating_point:
                expr = f"kiln::float_to_int_lanes<{target.vector}>({text})"
            else:
                expr = f"kiln::convert<{target.vector}>({text})"
            expr = self._narrow(expr, dtype, vector=True)
        else:
            if dtype == torch.bool:
                expr = f"({text} != 0)"
            elif src.is_floating_point and not dtype.is_floating_point:
                expr = f"kiln::float_to_int<{target.scalar}>({text})"
            else:
                expr = f"static_cast<{target.scalar}>({text})"
            expr = self._narrow(expr, dtype, vector=False)
        return self._emit(expr, dtype)

    @staticmethod
    def _narrow(expr: str, dtype: torch.dtype, *, vector: bool) -> str:
        """Round or wrap a compute-type value to ``dtype``'s precision and range."""
        if dtype == torch.float16:
            return f"kiln::round_half({expr})"
        if dtype == torch.bfloat16:
            return f"kiln::round_bfloat16({expr})"
        narrow = {torch.int8: "int8_t", torch.uint8: "uint8_t", torch.int16: "int16_t"}.get(dtype)
        if narrow is None:
            return expr
        if vector:
            return f"kiln::wrap_{narrow.removesuffix('_t')}({expr})"
        return f"static_cast<int32_t>(static_cast<{narrow}>({expr}))"

    def where(self, condition: CppValue, a: CppValue, b: CppValue) -> CppValue:
        """``a`` where ``condition`` else ``b``."""
        c, x, y = self._lift(condition), self._lift(a), self._lift(b)
        if not self.vector:
            return self._emit(f"({c} ? {x} : {y})", a.dtype)
        function = "kiln::where_mask" if a.dtype == torch.bool else "kiln::where"
        return self._emit(f"{function}({c}, {x}, {y})", a.dtype)

    def rand(self, seed: CppValue, offset: CppValue) -> CppValue:
        """Uniform float32 in [0, 1) from (seed, offset)."""
        return self._emit(f"kiln::rand({self._to_int64(seed)}, {self._to_int64(offset)})", torch.float32)

    def randn(self, seed: CppValue, offset: CppValue) -> CppValue:
        """Standard normal float32 from (seed, offset)."""
        return self._emit(f"kiln::randn({self._to_int64(seed)}, {self._to_int64(offset)})", torch.float32)

    # ------------------------------------------------------------------ reductions
    def reduction(
        self, dtype: torch.dtype, src_dtype: torch.dtype, reduction_type: str, value: CppValue
    ) -> CppValue:
        """Accumulate ``value`` across the reduction loop; the result is a scalar after the loop.

        ``welford_reduce`` / ``welford_combine`` return (mean, m2, weight); sibling nodes reducing the
        same value in this loop share one accumulator (the value's variable is the same after CSE).
        """
        from codegen_cpp.codegen.reduction import emit_reduction, emit_welford, emit_welford_combine

        key = (self.node_name, self._reductions_seen)
        self._reductions_seen += 1
        if reduction_type in ("welford_reduce", "welford_combine"):
            named = ",".join(v.name for v in value) if isinstance(value, tuple) else value.name
            cache = f"{reduction_type}:{named}:{dtype}"
            owner = self.state.welford_owner.get(key)
            if owner is None:
                # First run of this body: share the accumulator of an earlier sibling reducing the
                # same value (same variable after CSE). Later runs (the scalar tail, whose masked
                # loads are not CSE'd) follow this decision instead of re-deciding it.
                owner = self.state.welford_owner[key] = self.scope.welford_keys.setdefault(cache, key)
            if owner != key:
                shared = [self.scope.cse.get(f"welford:{owner}:{k}") for k in range(3)]
                if any(v is None for v in shared):
                    raise AssertionError(f"welford sibling {key} runs before its owner {owner}")
                self._target = self.scope.post if (self.outer or not self.vector) else []
                return tuple(shared)  # type: ignore[return-value]
            if reduction_type == "welford_combine":
                results = emit_welford_combine(self, key, dtype, value)  # type: ignore[arg-type]
            else:
                results = emit_welford(self, key, dtype, value)
            for k, v in enumerate(results):
                self.scope.cse[f"welford:{key}:{k}"] = v
            self._target = self.scope.post if (self.outer or not self.vector) else []
            return results  # type: ignore[return-value]
        result = emit_reduction(self, key, dtype, reduction_type, value)
        # What follows (store_reduction) runs once per pointwise index, after the loop; the copy
        # of an inner vector run is dropped (the scalar tail's run writes it, combining both
        # accumulators). Vectorized across pointwise indices, the result is a vector to store.
        self._target = self.scope.post if (self.outer or not self.vector) else []
        return result

    def store_reduction(self, name: str, index: sympy.Expr, value: CppValue) -> None:
        """Write a finished reduction (after the loop)."""
        if name in self.state.internal:
            self.scope.reduced[name] = value
            return
        if self.vector and not self.outer:
            return  # the scalar tail's run stores the combined result
        self._write(name, sympy.expand(index), value)
