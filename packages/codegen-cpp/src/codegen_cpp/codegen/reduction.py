"""C++ for ``ops.reduction``: accumulator declarations, per-element updates, the final combine.

A reduction loop with a vector part keeps two accumulators: ``accN_vec`` (one partial result per
lane, updated by the vector loop) and ``accN`` (updated by the scalar tail); after the loop the
lanes are reduced horizontally and combined with the scalar one.

Long float32 sums are blocked (cascade summation): the vector loop runs in blocks of
``REDUCTION_BLOCK`` elements, each accumulating in float32 lanes (full SIMD width, no conversions per
element: ``accN_blk``), and after each block the partial result is folded into double lanes
(``accN_vec``). Each float32 lane then adds at most ``REDUCTION_BLOCK / VEC`` terms, so the result
stays as exact as eager's. A float32 Welford reduction of a row up to 16,384 long takes its moments
after the loop (``kiln::row_moments``); a longer or symbolic one updates double lanes (its moments
are float64 on the CPU: a float32 m2 overflows for values near 1e19 where the variance does not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy
import torch

from codegen_cpp.codegen.dtypes import cpp_dtype
from codegen_cpp.codegen.lanes import VECTOR_LANES
from codegen_cpp.codegen.printer import cpp_index
from codegen_cpp.codegen.reuse import MAX_SCRATCH_ELEMENTS

if TYPE_CHECKING:
    from codegen_cpp.codegen.handler import CppOpsHandler, CppValue

__all__ = ["REDUCTION_BLOCK", "REDUCTION_OUTER_BLOCK", "combine_partial", "emit_reduction", "emit_welford", "emit_welford_combine"]

_HORIZONTAL = {
    "sum": "kiln::hsum",
    "prod": "kiln::hprod",
    "max": "kiln::hmax",
    "min": "kiln::hmin",
    "any": "kiln::hany",
}


def _identity(reduction_type: str, scalar: str) -> str:
    return {
        "sum": f"static_cast<{scalar}>(0)",
        "prod": f"static_cast<{scalar}>(1)",
        "max": f"kiln::max_identity<{scalar}>()",
        "min": f"kiln::min_identity<{scalar}>()",
        "any": "false",
    }[reduction_type]


# Float32 lanes add at most ~512 terms each before a sum is folded into double lanes (more terms per
# lane lose accuracy to eager's cascade sums: with 8 lanes, 868 terms each gave 4x eager's error on
# a 6943-element sum).
LONG_REDUCTION = 512 * VECTOR_LANES  # longer float sums (or symbolic ones) fold float32 blocks into double lanes
REDUCTION_BLOCK = 256 * VECTOR_LANES  # elements per float32 block of a blocked (cascade) reduction (256 steps: kiln::BLOCK_STEPS)
REDUCTION_OUTER_BLOCK = 256  # steps per block when each lane is one output


def _long(handler: CppOpsHandler) -> bool:
    """Whether the reduction is long enough for float lanes to lose accuracy (n / VEC adds each,
    or n adds each when every lane is one output)."""
    size = sympy.Mul(*handler.reduction_sizes) if handler.reduction_sizes else sympy.Integer(1)
    limit = REDUCTION_OUTER_BLOCK if handler.outer else LONG_REDUCTION
    return not (size.is_Integer and int(size) <= limit)


def _scalar_accumulator(reduction_type: str, scalar: str) -> str:
    """The C++ type a scalar accumulator uses: float sums run in double (one rounding at the end)."""
    return "double" if reduction_type == "sum" and scalar == "float" else scalar


def combine_partial(reduction_type: str, acc: str, partial: str, vector: bool) -> str:
    """The line folding one thread's partial accumulator into the shared one."""
    if reduction_type == "welford":
        # ``acc`` is the mean of a (mean, m2, count) triple; the whole triple folds here.
        names = (acc, _sibling(acc, "m2"), _sibling(acc, "n"))
        return _chan(*names, partial, _sibling(partial, "m2"), _sibling(partial, "n"), vector)
    if reduction_type == "welford_part":
        return ""  # folded with its mean
    return _update(reduction_type, acc, partial, vector)


def _fold(reduction_type: str, a: str, b: str, vector: bool) -> str:
    """The expression combining two partial results of one reduction type."""
    if reduction_type == "sum":
        return f"{a} + {b}"
    if reduction_type == "prod":
        return f"{a} * {b}"
    if reduction_type == "max":
        return f"kiln::maximum({a}, {b})"
    if reduction_type == "min":
        return f"kiln::minimum({a}, {b})"
    if reduction_type == "any":
        return f"({a} {'|' if vector else '||'} {b})"
    raise NotImplementedError(f"reduction type {reduction_type!r} is not supported by the C++ backend")


def _update(reduction_type: str, acc: str, value: str, vector: bool) -> str:
    return f"{acc} = {_fold(reduction_type, acc, value, vector)};"


def _combine(reduction_type: str, scalar: str, vector: str) -> str:
    return _fold(reduction_type, scalar, f"{_HORIZONTAL[reduction_type]}({vector})", vector=False)


def _linear_reduction_index(handler: CppOpsHandler) -> str:
    """Row-major linear index over the reduction range (lane 0's in vector code)."""
    index: sympy.Expr = sympy.Integer(0)
    stride: sympy.Expr = sympy.Integer(1)
    for var, size in reversed(list(zip(handler.reduction_vars, handler.reduction_sizes))):
        index += var * stride
        stride *= size
    return cpp_index(sympy.expand(index))


def emit_reduction(
    handler: CppOpsHandler, key: tuple[str, int], dtype: torch.dtype, reduction_type: str, value: CppValue
) -> CppValue:
    """Emit one reduction's accumulator, update and (scalar run) final value; return the result value."""
    from codegen_cpp.codegen.handler import CppValue

    state, scope = handler.state, handler.scope
    acc = state.accumulators.setdefault(key, state.fresh("acc"))
    vec_acc = f"{acc}_vec"
    is_arg = reduction_type in ("argmax", "argmin")
    value_dtype = value.dtype if is_arg else dtype
    if not is_arg and cpp_dtype(value.dtype).scalar != cpp_dtype(dtype).scalar:
        value = handler.to_dtype(value, dtype, value.dtype)
    info = cpp_dtype(value_dtype)
    text = handler._lift(value)
    is_max = "true" if reduction_type == "argmax" else "false"
    target = handler._target
    if handler.outer:
        return _emit_outer(handler, vec_acc, dtype, reduction_type, text, info.vector, is_max)
    if handler.vector:
        if vec_acc not in state.vector_accumulators:
            state.vector_accumulators.add(vec_acc)
            if is_arg:
                scope.pre.append(f"auto {vec_acc} = kiln::arg_init_vec<{info.vector}>({is_max});")
            elif reduction_type == "any":
                scope.pre.append(f"kiln::maskx {vec_acc} = kiln::splat_mask(false);")
            elif reduction_type == "sum" and info.vector == "kiln::f32x" and _long(handler):
                scope.pre.append(f"kiln::f64x {vec_acc} = kiln::splat<kiln::f64x>(0.0);")
                scope.block_pre.append(f"kiln::f32x {acc}_blk = kiln::splat<kiln::f32x>(0.0f);")
                scope.block_post.append(f"{vec_acc} = {vec_acc} + kiln::convert<kiln::f64x>({acc}_blk);")
            else:
                identity = _identity(reduction_type, info.scalar)
                scope.pre.append(f"{info.vector} {vec_acc} = kiln::splat<{info.vector}>({identity});")
        if is_arg:
            target.append(
                f"kiln::arg_update_vec({is_max}, {vec_acc}, {text}, {_linear_reduction_index(handler)});"
            )
        else:
            if reduction_type == "sum" and info.vector == "kiln::f32x" and _long(handler):
                # Long float sums: float32 lanes per block, folded into double lanes per block.
                target.append(_update(reduction_type, f"{acc}_blk", text, vector=True))
            else:
                target.append(_update(reduction_type, vec_acc, text, vector=True))
            state.combinable[vec_acc] = (reduction_type, True)
        return CppValue(vec_acc, dtype, True)
    if is_arg:
        scope.pre.append(f"auto {acc} = kiln::arg_init<{info.scalar}>({is_max});")
        target.append(f"kiln::arg_update({is_max}, {acc}, {text}, {_linear_reduction_index(handler)});")
    else:
        acc_type = _scalar_accumulator(reduction_type, info.scalar)
        scope.pre.append(f"{acc_type} {acc} = {_identity(reduction_type, acc_type)};")
        target.append(_update(reduction_type, acc, text, vector=False))
        state.combinable[acc] = (reduction_type, False)
    result = state.fresh("red")
    has_vector = vec_acc in state.vector_accumulators
    if is_arg:
        args = f"{is_max}, {vec_acc}, {acc}" if has_vector else f"{is_max}, {acc}"
        scope.post.append(f"const int64_t {result} = kiln::arg_finish({args});")
    else:
        final = _combine(reduction_type, acc, vec_acc) if has_vector else acc
        # A narrow integer (int8 held in int32) wraps here, as eager's result does: its consumers in
        # this kernel read it before any store would wrap it (a product of int8 then `100 // it`).
        narrowed = handler._narrow(f"static_cast<{info.scalar}>({final})", dtype, vector=False)
        scope.post.append(f"const {info.scalar} {result} = {narrowed};")
    return CppValue(result, dtype, False)


def _emit_outer(
    handler: CppOpsHandler,
    acc: str,
    dtype: torch.dtype,
    reduction_type: str,
    value: str,
    vector: str,
    is_max: str,
) -> CppValue:
    """Vectorized across pointwise indices: each lane is one output's accumulator and result."""
    from codegen_cpp.codegen.handler import CppValue

    scope, target = handler.scope, handler._target
    result = handler.state.fresh("red")
    index = _linear_reduction_index(handler)
    if reduction_type in ("argmax", "argmin"):
        scope.pre.append(f"auto {acc} = kiln::arg_init_vec<{vector}>({is_max});")
        target.append(f"kiln::arg_update_lanes({is_max}, {acc}, {value}, {index});")
        scope.post.append(f"const auto {result} = kiln::arg_result({acc});")
    else:
        handler.state.outer_kinds[acc] = reduction_type
        if reduction_type == "any":
            scope.pre.append(f"kiln::maskx {acc} = kiln::splat_mask(false);")
            target.append(_update(reduction_type, acc, value, vector=True))
            scope.post.append(f"const auto {result} = {acc};")
        elif reduction_type == "sum" and vector == "kiln::f32x" and _long(handler):
            # A long sequential float sum per lane: float32 lanes per block of REDUCTION_OUTER_BLOCK
            # steps, folded into double lanes after each block, rounded once at the end.
            scope.pre.append(f"kiln::f64x {acc} = kiln::splat<kiln::f64x>(0.0);")
            scope.block_pre.append(f"kiln::f32x {acc}_blk = kiln::splat<kiln::f32x>(0.0f);")
            scope.block_post.append(f"{acc} = {acc} + kiln::convert<kiln::f64x>({acc}_blk);")
            target.append(_update(reduction_type, f"{acc}_blk", value, vector=True))
            scope.post.append(f"const auto {result} = kiln::convert<kiln::f32x>({acc});")
        else:
            identity = _identity(reduction_type, cpp_dtype(dtype).scalar)
            scope.pre.append(f"{vector} {acc} = kiln::splat<{vector}>({identity});")
            target.append(_update(reduction_type, acc, value, vector=True))
            scope.post.append(f"const auto {result} = {handler._narrow(acc, dtype, vector=True)};")
    return CppValue(result, dtype, True)


# -- Welford ---------------------------------------------------------------------------------------
#
# A welford_reduce keeps a (mean, m2, count) triple per accumulator. The vector loop updates one
# triple per lane; every lane sees the same number of elements, so the count is one scalar
# (``accN_vn``) and each step costs one scalar reciprocal per vector. float32 accumulates in double. The scalar tail keeps its own
# triple (``accN_mean``, ``accN_m2``, ``accN_n``). After the loop the lanes are merged exactly (equal
# counts: mean of means, m2 plus the spread of the lane means) and folded with the tail by Chan's
# formula, as are the private triples of threads when a reduction is split across threads.


def _nan(scalar: str) -> str:
    """The NaN of a C++ float type: the mean of no elements (eager's 0 / 0; the running mean stays 0)."""
    return f"std::numeric_limits<{scalar}>::quiet_NaN()"


def _sibling(mean_name: str, part: str) -> str:
    """``accN_vm2`` from ``accN_vmean`` (also with a ``_t`` thread suffix)."""
    if "_vmean" in mean_name:
        return mean_name.replace("_vmean", "_v" + part)
    return mean_name.replace("_mean", "_" + part)


def _chan(mean: str, m2: str, n: str, mean_b: str, m2_b: str, n_b: str, vector: bool) -> str:
    """One line folding the triple ``(mean_b, m2_b, n_b)`` into ``(mean, m2, n)`` (Chan et al.)."""
    kind = "std::decay_t<decltype(kiln_delta)>"
    scale = (lambda x: f"kiln::splat<{kind}>({x})") if vector else (lambda x: f"static_cast<{kind}>({x})")
    return (
        f"if ({n_b} > 0) {{ const auto kiln_total = {n} + {n_b}; "
        f"const double kiln_wb = static_cast<double>({n_b}) / static_cast<double>(kiln_total); "
        f"const auto kiln_delta = {mean_b} - {mean}; "
        f"{mean} = {mean} + kiln_delta * {scale('kiln_wb')}; "
        f"{m2} = {m2} + {m2_b} + kiln_delta * kiln_delta * {scale(f'static_cast<double>({n}) * kiln_wb')}; "
        f"{n} = kiln_total; }}"
    )


def emit_welford(
    handler: CppOpsHandler, key: tuple[str, int], dtype: torch.dtype, value: CppValue
) -> tuple[CppValue, CppValue, CppValue]:
    """Emit a one-pass Welford reduction of ``value``; returns its (mean, m2, weight) values.

    float32 values accumulate in double (lanes of ``kiln::f64x``), as eager's CPU variance does:
    a float32 running mean near 1e4 has a rounding step (1e-3) that would swamp a small spread.
    """
    from codegen_cpp.codegen.handler import CppValue

    state, scope, target = handler.state, handler.scope, handler._target
    # float32 values whose moments are float64 (a CPU variance, a split's partials) stay float32 where
    # that is faster (the row moments read float32 rows; the lanes below convert each value to double)
    # and the double results are kept unrounded.
    widened = value.dtype == torch.float32 and dtype == torch.float64
    if not widened and cpp_dtype(value.dtype).scalar != cpp_dtype(dtype).scalar:
        value = handler.to_dtype(value, dtype, value.dtype)
    info = cpp_dtype(dtype)
    wide = info.scalar == "float" or widened
    scalar, vector = ("double", "kiln::f64x") if wide else (info.scalar, info.vector)
    acc = state.accumulators.setdefault(key, state.fresh("acc"))
    text = handler._lift(value)
    if wide:
        text = f"kiln::convert<kiln::f64x>({text})" if handler.vector else f"static_cast<double>({text})"
    if wide and not handler.outer:
        length = _row_length(handler)
        if length is not None:
            return _row_moments(handler, dtype, value, acc, length)
    zero = f"static_cast<{scalar}>(0)"
    mean, m2, n = f"{acc}_vmean", f"{acc}_vm2", f"{acc}_vn"
    declare = [
        f"{vector} {mean} = kiln::splat<{vector}>({zero});",
        f"{vector} {m2} = kiln::splat<{vector}>({zero});",
        f"int64_t {n} = 0;",
    ]
    if handler.outer:
        # Each lane is one output; all lanes share the step count.
        scope.pre += declare
        target.append(_vector_step(mean, m2, n, text, scalar, vector))
        names = [state.fresh("red") for _ in range(3)]
        narrow = (lambda x: f"kiln::convert<{info.vector}>({x})") if wide else (lambda x: x)
        weight = f"kiln::splat<{vector}>(static_cast<{scalar}>({n}))"
        nan = f"kiln::splat<{info.vector}>(std::numeric_limits<{info.scalar}>::quiet_NaN())"
        scope.post.append(f"const auto {names[0]} = {n} == 0 ? {nan} : {narrow(mean)};  // eager: 0 / 0")
        for name, source in zip(names[1:], (m2, weight)):
            scope.post.append(f"const auto {name} = {narrow(source)};")
        return CppValue(names[0], dtype, True), CppValue(names[1], dtype, True), CppValue(names[2], dtype, True)
    if handler.vector:
        if mean not in state.vector_accumulators:
            state.vector_accumulators.add(mean)
            scope.pre += declare
            state.combinable[mean] = ("welford", True)
            state.combinable[m2] = ("welford_part", True)
            state.combinable[n] = ("welford_part", False)
        target.append(_vector_step(mean, m2, n, text, scalar, vector))
        # The vector run's results are never stored (the scalar tail's run finishes the reduction).
        return CppValue(mean, dtype, True), CppValue(m2, dtype, True), CppValue(n, dtype, True)
    vmean, vm2, vn = mean, m2, n
    mean, m2, n = f"{acc}_mean", f"{acc}_m2", f"{acc}_n"
    scope.pre += [f"{scalar} {mean} = {zero};", f"{scalar} {m2} = {zero};", f"int64_t {n} = 0;"]
    state.combinable[mean] = ("welford", False)
    state.combinable[m2] = ("welford_part", False)
    state.combinable[n] = ("welford_part", False)
    target.append(
        f"{{ {n} += 1; const {scalar} kiln_delta = {text} - {mean}; "
        f"{mean} = {mean} + kiln_delta / static_cast<{scalar}>({n}); {m2} = {m2} + kiln_delta * ({text} - {mean}); }}"
    )
    result = state.fresh("red")
    r_mean, r_m2, r_n = f"{result}_wmean", f"{result}_wm2", f"{result}_n"
    post = [f"{scalar} {r_mean} = {mean};", f"{scalar} {r_m2} = {m2};", f"int64_t {r_n} = {n};"]
    if vmean in state.vector_accumulators:
        lanes = f"std::decay_t<decltype({vmean})>"
        post += [
            f"if ({vn} > 0) {{",
            f"    const {scalar} kiln_lanes_mean = kiln::hsum({vmean}) / static_cast<{scalar}>(kiln::VEC);",
            f"    const auto kiln_d = {vmean} - kiln::splat<{lanes}>(kiln_lanes_mean);",
            f"    const auto kiln_lanes_spread = {vm2} + kiln_d * kiln_d * kiln::splat<{lanes}>(static_cast<{scalar}>({vn}));",
            f"    const {scalar} kiln_lanes_m2 = kiln::hsum(kiln_lanes_spread);",
            f"    const int64_t kiln_lanes_n = {vn} * kiln::VEC;",
            "    " + _chan(r_mean, r_m2, r_n, "kiln_lanes_mean", "kiln_lanes_m2", "kiln_lanes_n", vector=False),
            "}",
        ]
    out = info.scalar
    post += [
        f"const {out} {result}_mean = {r_n} == 0 ? {_nan(out)} : static_cast<{out}>({r_mean});",
        f"const {out} {result}_m2 = static_cast<{out}>({r_m2});",
        f"const {out} {result}_weight = static_cast<{out}>({r_n});",
    ]
    scope.post.extend(post)
    return (
        CppValue(f"{result}_mean", dtype, False),
        CppValue(f"{result}_m2", dtype, False),
        CppValue(f"{result}_weight", dtype, False),
    )


def _row_length(handler: CppOpsHandler) -> int | None:
    """The length of a row reduction whose moments are taken after its loop (``kiln::row_moments``),
    or None to run Welford's update in the loop.

    Rows of a static length up to ``MAX_SCRATCH_ELEMENTS`` only: a row the loop computes is kept in
    an array on each thread's stack, and the row is still in cache when the two passes over it run.
    """
    size = sympy.Mul(*handler.reduction_sizes) if handler.reduction_sizes else sympy.Integer(1)
    if not (size.is_Integer and 1 <= int(size) <= MAX_SCRATCH_ELEMENTS):
        return None
    return int(size)


def _row_in_memory(handler: CppOpsHandler, value: CppValue) -> str | None:
    """``pointer + base`` when ``value`` is a float32 load whose element ``r`` of the row lies at
    ``base + r`` (one reduction variable, stride 1): the moments then read the row from there."""
    found = handler.state.plain_loads.get(value.name)
    if found is None or len(handler.reduction_vars) != 1:
        return None
    name, index = found
    var = handler.reduction_vars[0]
    pointer = handler.state.pointers[name]
    if not pointer.startswith("in_ptr"):
        return None  # an in/out pointer: the loop may overwrite the row before the moments read it
    if handler.state.storage[name] != torch.float32 or value.dtype != torch.float32:
        return None
    base = sympy.expand(index - var)
    if base.has(var):
        return None
    return f"{pointer} + {cpp_index(base)}"


def _row_moments(
    handler: CppOpsHandler, dtype: torch.dtype, value: CppValue, acc: str, size: int
) -> tuple[CppValue, CppValue, CppValue]:
    """A float32 Welford reduction by two passes after the loop: ``kiln::row_moments`` takes (mean,
    m2) from the row (see runtime/kiln_cpu_reduce.h), read where the loop loads it from memory, else
    from an array the loop stores each value into. The first run (the vector loop's, if any) decides
    which; the scalar run (the tail) finishes the reduction."""
    from codegen_cpp.codegen.handler import CppValue

    state = handler.state
    if acc not in state.row_sources:
        state.row_sources[acc] = _row_in_memory(handler, value)
    source = state.row_sources[acc]
    if source is None:
        source = f"{acc}_row"
        state.row_arrays.setdefault(source, f"alignas(64) float {source}[{size}];")
        store = "kiln::store" if handler.vector else "kiln::store1"
        handler._target.append(f"{store}({source} + {_linear_reduction_index(handler)}, {handler._lift(value)});")
        spelled = state.canonical.get(value.name)  # "(expression)", as handler._emit records it
        if handler.reuse is not None and spelled is not None and value.vector == handler.vector:
            handler.reuse.adopt(spelled[1:-1], handler.vector, value.name, value.dtype, handler._target, source)
    result = state.fresh("red")
    names = (f"{result}_mean", f"{result}_m2", f"{result}_weight")
    if handler.vector:
        return tuple(CppValue(n, dtype, True) for n in names)  # type: ignore[return-value]
    out = cpp_dtype(dtype).scalar  # float, or double for float64 moments
    handler.scope.post += [
        f"const kiln::Moments {acc}_moments = kiln::row_moments({source}, {size});",
        f"const {out} {names[0]} = static_cast<{out}>({acc}_moments.mean);",
        f"const {out} {names[1]} = static_cast<{out}>({acc}_moments.m2);",
        f"const {out} {names[2]} = static_cast<{out}>({size});",
    ]
    return CppValue(names[0], dtype, False), CppValue(names[1], dtype, False), CppValue(names[2], dtype, False)


def emit_welford_combine(
    handler: CppOpsHandler, key: tuple[str, int], dtype: torch.dtype, values: tuple[CppValue, ...]
) -> tuple[CppValue, CppValue, CppValue]:
    """Merge partial (mean, m2, weight) triples by Chan's formula, in scalar code (the partials of a
    split Welford reduction are few); float32 accumulates in double."""
    from codegen_cpp.codegen.handler import CppValue, Unvectorizable

    if handler.vector:
        raise Unvectorizable("welford_combine runs in scalar code")
    state, scope = handler.state, handler.scope
    info = cpp_dtype(dtype)
    scalar = "double" if info.scalar == "float" else info.scalar
    acc = state.accumulators.setdefault(key, state.fresh("acc"))
    mean, m2, n = f"{acc}_mean", f"{acc}_m2", f"{acc}_n"
    scope.pre += [f"{scalar} {mean} = 0;", f"{scalar} {m2} = 0;", f"{scalar} {n} = 0;"]
    state.combinable[mean] = ("welford", False)
    state.combinable[m2] = ("welford_part", False)
    state.combinable[n] = ("welford_part", False)
    b_mean, b_m2, b_n = (f"static_cast<{scalar}>({handler._lift(v)})" for v in values)
    handler._target.append("{ " + _chan(mean, m2, n, b_mean, b_m2, b_n, vector=False) + " }")
    result = state.fresh("red")
    names = (f"{result}_mean", f"{result}_m2", f"{result}_weight")
    scope.post.append(f"const {info.scalar} {names[0]} = {n} == 0 ? {_nan(info.scalar)} : static_cast<{info.scalar}>({mean});")
    for name, source in zip(names[1:], (m2, n)):
        scope.post.append(f"const {info.scalar} {name} = static_cast<{info.scalar}>({source});")
    return CppValue(names[0], dtype, False), CppValue(names[1], dtype, False), CppValue(names[2], dtype, False)


def _vector_step(mean: str, m2: str, n: str, value: str, scalar: str, vector: str) -> str:
    """One Welford step of every lane: ``n`` is the shared count."""
    return (
        f"{{ {n} += 1; const auto kiln_delta = {value} - {mean}; "
        f"{mean} = {mean} + kiln_delta * kiln::splat<{vector}>(static_cast<{scalar}>(1) / static_cast<{scalar}>({n})); "
        f"{m2} = {m2} + kiln_delta * ({value} - {mean}); }}"
    )
