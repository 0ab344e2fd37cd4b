"""`lower(gm, example_inputs) -> Program`: walk an ATen FX graph and build IR, node by node.

Each ``call_function`` node runs its lowering from ``LOWERINGS``; a miss (or a lowering raising
``NotLowerable``) makes a ``FallbackKernel`` that runs the ATen op as itself. Pointwise values stay
unrealized (inlined into their users) unless they are graph outputs, are used several times and
are expensive, or feed an extern/fallback call. ``lower`` reads ``gm`` and never changes it; the
graph rewrites that run before it are ``graph_passes.py``'s, the channels-last policy is
``layout_policy.py``'s.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree
from torch.utils._sympy.symbol import SymT, make_symbol

from inductor_ir.config import DEFAULT_CONFIG
from inductor_ir.ir.layout import Layout
from inductor_ir.ir.nodes import (
    Buffer,
    ExternKernel,
    FallbackKernel,
    InputBuffer,
    IRNode,
    MultiOutput,
    Pointwise,
    Reduction,
    ReinterpretView,
)
from inductor_ir.ir.program import Program, SizeSource
from inductor_ir.layout_policy import (
    arguments_moved,
    convolution_result_layout,
    fake_result_layouts,
    wants_channels_last,
)
from inductor_ir.lowering import LOWERINGS, LoweringContext, NotLowerable
from inductor_ir.lowering.extern import ATTENTION_FALLBACK_OPS, store_in_recorded_layouts
from inductor_ir.lowering.views import with_eager_storage
from inductor_ir.symbolic import FloorDiv, concrete_hint, sympify_int
from inductor_ir.unbacked import (
    UnbackedSymbolError,
    bind_int_of_float,
    bind_results,
    bind_scalar,
    float_arguments,
    is_unbacked,
    is_unbacked_float,
    pinned_unbacked,
    record_assert,
    unbound_unbacked,
    used_symbols,
)

__all__ = ["layout_of", "lower"]

_aten = torch.ops.aten
_PYTHON_OPERATORS: dict[Any, Any] = {
    operator.add: _aten.add.Tensor,
    operator.sub: _aten.sub.Tensor,
    operator.mul: _aten.mul.Tensor,
    operator.truediv: _aten.div.Tensor,
    operator.floordiv: _aten.floor_divide.default,
    operator.neg: _aten.neg.default,
}


def layout_of(value: torch.Tensor) -> Layout:
    """The :class:`Layout` of a (real, fake or meta) tensor, symbolic sizes kept symbolic; offset 0."""
    size = tuple(sympify_int(s) for s in value.shape)
    stride = tuple(sympify_int(s) for s in value.stride())
    return Layout(str(value.device), value.dtype, size, stride)


def lower(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    layout_optimization: bool = DEFAULT_CONFIG.layout_optimization,
    eager_ops: Collection[Any] = frozenset(),
    strict_lowering: bool = DEFAULT_CONFIG.strict_lowering,
    free_layout_outputs: int = 0,
) -> Program:
    """Lower an ATen-level FX graph (``make_fx`` / ``aotgrad`` output) to a :class:`Program`.

    ``gm`` is read, never changed. ``compile_graph`` first runs the graph rewrites of
    ``graph_passes.py`` (``fuse_attention_pass``, ``fold_embedding_gradients_pass``); call them
    before ``lower`` for the program ``compile_graph`` would build.

    Args:
        gm: a graph of ``torch.ops.aten.*`` (and ``prims``) calls.
        example_inputs: one value per placeholder (real or fake tensors, ints), used for sizes.
        layout_optimization: store the 4-D buffers of a CUDA convolution graph channels-last (see
            ``layout_policy.py``); graph outputs keep the layouts FX recorded. The default is
            `InductorIRConfig`'s (on; see its docstring and docs/inductor-ir.md).
        eager_ops: ATen ops run as ``FallbackKernel`` calls even where a lowering exists (the kernel
            backends' ``eager_ops``, e.g. random ops that must draw from torch's generator).
        strict_lowering: a lowering that raises (other than ``NotLowerable``) raises from here, with
            the node and the user's line in a note; off (`InductorIRConfig`'s default), the op runs as
            a ``FallbackKernel`` and the error is recorded in ``program.lowering_errors``.
        free_layout_outputs: how many of the last outputs may come back in layouts of this graph's
            choosing (a training forward's values saved for a backward graph that is then compiled
            for the layouts ``Program.outputs`` have); the others keep the strides FX recorded.

    Returns:
        The program: inputs, buffers in execution order, outputs.
    """
    program = Program()
    ctx = LoweringContext(program)
    env: dict[torch.fx.Node, Any] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    _lower_inputs(program, placeholders, example_inputs, env)
    unbound = [str(s) for b in program.input_buffers() for s in used_symbols(b)
               if is_unbacked(s) and s not in program.size_sources]
    if unbound:  # e.g. a saved tensor of size `2*u0` only: no input gives u0 itself
        raise UnbackedSymbolError(f"no input gives the data-dependent size(s) {', '.join(sorted(set(unbound)))}")
    output_nodes, saved_nodes = _output_nodes(gm, free_layout_outputs)
    visible = output_nodes - saved_nodes
    ctx.channels_last = layout_optimization and wants_channels_last(gm.graph, visible, saved_nodes)
    ctx.saved_outputs = frozenset(saved_nodes) if ctx.channels_last else frozenset()
    for node in gm.graph.nodes:
        ctx.node = node
        if node.op == "get_attr":
            tensor = _get_attr(gm, node.target)
            buf = InputBuffer(f"const_{node.name}", layout_of(tensor), kind="constant")
            program.constants[buf.name] = tensor
            program.buffers.append(buf)
            env[node] = buf
        elif node.op == "call_function":
            env[node] = _lower_call(ctx, node, env, output_nodes, eager_ops, strict_lowering)
        elif node.op == "output":
            flat, program.output_spec = pytree.tree_flatten(node.args[0])
            free_from = len(flat) - free_layout_outputs
            program.outputs = [_lower_output(ctx, o, env, k >= free_from) for k, o in enumerate(flat)]
    ctx.node = None
    return program


def _lower_inputs(program: Program, placeholders: list[torch.fx.Node], example_inputs: Sequence[Any], env: dict[torch.fx.Node, Any]) -> None:
    strides: list[tuple[int, InputBuffer, Any]] = []
    for position, node in enumerate(placeholders):
        val = node.meta.get("val", example_inputs[position] if position < len(example_inputs) else None)
        real = example_inputs[position] if position < len(example_inputs) else None
        if isinstance(val, torch.Tensor):
            buf = InputBuffer(node.name, layout_of(val))
            program.graph_inputs.append(buf)
            env[node] = buf
            _add_sources(program, position, buf, real, "size")
            strides.append((position, buf, real))
        elif hasattr(val, "node") or isinstance(val, sympy.Expr):
            expr = sympify_int(val)
            program.graph_inputs.append(expr)
            env[node] = expr
            if isinstance(expr, sympy.Symbol):
                program.size_sources.setdefault(expr, SizeSource(position, "scalar"))
                hint = concrete_hint(real) if real is not None else None
                if hint is not None:
                    program.size_hints[expr] = hint
        else:
            program.graph_inputs.append(None)
            env[node] = val
    # A symbol is read from a stride only where no size or int input gives it: a size is exact, while
    # the stride of a dim of size 1 is whatever the producer chose (a sort's (1, s, 1) indices came
    # with stride 1 in dim 0 where FX recorded s, and s was read as 1).
    for position, buf, real in strides:
        _add_sources(program, position, buf, real, "stride", skip_unit_dims=True)
    for position, buf, real in strides:
        _add_sources(program, position, buf, real, "stride")
    # Last, symbols that appear only inside a size or stride such as `s + 1` (the diagonal of an
    # input whose rows step `s`): solved from that size or stride.
    for position, buf, _real in strides:
        _add_solved_sources(program, position, buf)
    _bind_scalar_expressions(program, placeholders, example_inputs, env)
    # Hints for symbols we could not see in real inputs: the fake tensors' own hints.
    for node in placeholders:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for s in val.shape:
                _hint_from_symint(program, s)


def _bind_scalar_expressions(
    program: Program, placeholders: list[torch.fx.Node], example_inputs: Sequence[Any], env: dict[torch.fx.Node, Any]
) -> None:
    """Give a new symbol, read from the input itself, to each scalar input that is an expression of
    symbols no input gives (a backward taking a saved ``2.0*zuf1``, the forward's ``item() * 2``):
    printed as that expression, the generated code named a symbol nothing defined."""
    taken: set[str] | None = None
    for position, node in enumerate(placeholders):
        expr = program.graph_inputs[position]
        if not isinstance(expr, sympy.Expr) or isinstance(expr, sympy.Symbol):
            continue
        if all(s in program.size_sources for s in expr.free_symbols):
            continue
        if taken is None:
            taken = {str(s) for item in program.graph_inputs if isinstance(item, sympy.Expr) for s in item.free_symbols}
            taken |= {str(s) for item in program.input_buffers() for s in used_symbols(item)}
        floating = any(is_unbacked_float(s) for s in expr.free_symbols) or not expr.is_integer
        kind = SymT.UNBACKED_FLOAT if floating else SymT.UNBACKED_INT
        index = 1_000_000 + position
        while str(make_symbol(kind, index)) in taken:
            index += 1
        symbol = make_symbol(kind, index, integer=not floating, real=True)
        taken.add(str(symbol))
        program.graph_inputs[position] = symbol
        env[node] = symbol
        program.size_sources[symbol] = SizeSource(position, "scalar")
        real = example_inputs[position] if position < len(example_inputs) else None
        hint = concrete_hint(real) if real is not None and not floating else None
        if hint is not None:
            program.size_hints[symbol] = hint


def _add_sources(
    program: Program, position: int, buf: InputBuffer, real: Any, kind: str, skip_unit_dims: bool = False
) -> None:
    """Record ``buf``'s sizes (or strides) as the sources of the symbols not sourced yet."""
    for dim, (size, stride) in enumerate(zip(buf.layout.size, buf.layout.stride)):
        expr = size if kind == "size" else stride
        if skip_unit_dims and sympy.sympify(size) == 1:
            continue
        if isinstance(expr, sympy.Symbol) and expr not in program.size_sources:
            program.size_sources[expr] = SizeSource(position, kind, dim)
            if isinstance(real, torch.Tensor):
                hint = concrete_hint(real.shape[dim] if kind == "size" else real.stride()[dim])
                if hint is not None:
                    program.size_hints[expr] = hint


def _add_solved_sources(program: Program, position: int, buf: InputBuffer) -> None:
    """Source the symbols still unsourced that a size or stride of ``buf`` gives as ``a * s + b``
    (integers a != 0 and b): ``s = (value - b) // a``. The size checks then compare the value with
    ``a * s + b`` (a value that is not of that form is rejected)."""
    for dim, (size, stride) in enumerate(zip(buf.layout.size, buf.layout.stride)):
        # The stride of a dim of size 1 is whatever the producer chose: never a source.
        kinds = (("size", size),) if sympy.sympify(size) == 1 else (("size", size), ("stride", stride))
        for kind, expr in ((k, sympy.sympify(e)) for k, e in kinds):
            unsourced = [s for s in expr.free_symbols if s not in program.size_sources]
            if len(unsourced) != 1 or len(expr.free_symbols) != 1 or not expr.is_polynomial(unsourced[0]):
                continue
            (symbol,) = unsourced
            poly = sympy.Poly(expr, symbol)
            if poly.degree() != 1 or not all(isinstance(c, sympy.Integer) for c in poly.all_coeffs()):
                continue
            a, b = (int(c) for c in poly.all_coeffs())
            program.size_sources[symbol] = SizeSource(position, kind, dim, python=f"(({{read}}) - {b}) // {a}")


def _hint_from_symint(program: Program, value: Any) -> None:
    node = getattr(value, "node", None)
    if node is None or not hasattr(node, "expr"):
        return
    expr = sympify_int(value)
    if isinstance(expr, sympy.Symbol) and expr not in program.size_hints:
        hint = getattr(node, "hint", None)
        if hint is not None:
            program.size_hints[expr] = int(hint)


def _output_nodes(
    gm: torch.fx.GraphModule, free_layout_outputs: int = 0
) -> tuple[set[torch.fx.Node], set[torch.fx.Node]]:
    """The nodes returned where their recorded layout is kept, and those returned only among the
    last ``free_layout_outputs`` outputs (whose layouts the graph may choose)."""
    kept: set[torch.fx.Node] = set()
    free: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        if node.op == "output":
            flat = pytree.tree_leaves(node.args[0])
            for k, value in enumerate(flat):
                if isinstance(value, torch.fx.Node):
                    (free if k >= len(flat) - free_layout_outputs else kept).add(value)
    return kept | free, free - kept


def _get_attr(gm: torch.fx.GraphModule, target: str) -> torch.Tensor:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value  # type: ignore[no-any-return]


_TENSOR_PROPERTIES = frozenset({_aten.sym_size.int, _aten.sym_stride.int, _aten.sym_storage_offset.default})


def _about_tensor_properties(condition: Any) -> bool:
    """True for a condition on sizes, strides or storage offsets of tensors only. Torch states such
    facts about the views it makes (`sym_storage_offset(view) >= 0` after slicing with data-dependent
    bounds); they hold for every real tensor, so one whose symbols the generated code does not bind
    (a view's storage offset) is not checked. Bound ones (`nonzero(t).size(0) >= 2`) are."""
    if not isinstance(condition, torch.fx.Node):
        return False
    reads = [n for n in condition.all_input_nodes if n.op == "call_function"]
    return bool(reads) and all(n.target in _TENSOR_PROPERTIES for n in reads) and all(
        isinstance(arg, (int, torch.fx.Node)) for arg in condition.args)


def _lower_call(
    ctx: LoweringContext,
    node: torch.fx.Node,
    env: dict[torch.fx.Node, Any],
    outputs: set[torch.fx.Node],
    eager_ops: Collection[Any] = frozenset(),
    strict: bool = False,
) -> Any:
    val = node.meta.get("val")
    if node.target is operator.getitem:
        container, item = torch.fx.map_arg(node.args, lambda n: env[n])
        return container[item]  # type: ignore[index]
    if node.target is _aten._local_scalar_dense.default:
        return _item(ctx, node, env)
    if node.target is _aten._assert_scalar.default:  # `torch._check(u0 <= 8)`: the wrapper checks it
        condition = node.args[0]
        try:
            record_assert(ctx.program, condition.meta.get("val") if isinstance(condition, torch.fx.Node) else condition)
        except UnbackedSymbolError:
            if not _about_tensor_properties(condition):
                raise
        return None
    if isinstance(val, torch.SymInt) and float_arguments(getattr(val.node, "expr", None)):
        return bind_int_of_float(ctx.program, val)  # `int(t.item())` of a float
    if val is not None and not isinstance(val, (torch.Tensor, list, tuple)) and hasattr(val, "node"):
        return sympify_int(val)  # SymInt arithmetic: FX already knows the expression.
    # A data-dependent op (nonzero, masked_select, unique, a boolean mask): its result's sizes are
    # unbacked symbols that the wrapper reads from the result of a FallbackKernel.
    unbound = unbound_unbacked(ctx.program, val)
    pinned = pinned_unbacked(ctx.program, node.meta.get("unbacked_bindings"), unbound)
    # A value realized for an earlier user (e.g. a matmul operand) is loaded from its buffer.
    args = torch.fx.map_arg(node.args, lambda n: ctx.stored(env[n]))
    kwargs = torch.fx.map_arg(node.kwargs, lambda n: ctx.stored(env[n]))
    target = node.target
    if target in _PYTHON_OPERATORS:
        if not any(isinstance(a, IRNode) for a in args):
            return target(*args)  # type: ignore[operator]  # arithmetic on sizes
        target = _PYTHON_OPERATORS[target]  # a traced `x + 1` on tensors: the ATen op
    result: Any = None
    if unbound or pinned or float_arguments([args, kwargs]):
        result = fallback(ctx, target, args, kwargs, val)
        bind_results(ctx.program, result, unbound | set(pinned), _shape_env_of(val), pinned)
        return result
    fn = None if target in eager_ops or _touches_complex(node) else LOWERINGS.get(target)
    if fn is not None:
        try:
            result = fn(ctx, *args, **kwargs)
        except NotLowerable:
            result = None
        except Exception as error:  # a lowering bug must not break the user's program: run ATen
            where = _user_location(node)
            if strict:
                error.add_note(f"while lowering {node.format_node()}{where} (strict_lowering is on; off, "
                               "the op would run as a FallbackKernel)")
                raise
            ctx.program.lowering_errors.append(
                f"lowering {node.target} failed ({type(error).__name__}: {error}){where}; it runs as a FallbackKernel"
            )
            result = None
    if result is None:
        return fallback(ctx, target, args, kwargs, val)
    _merge_origins(result, args)
    if ctx.channels_last and target is _aten.convolution.default and isinstance(result, ExternKernel):
        result.layout = convolution_result_layout(result)
    if isinstance(result, Reduction):
        result = ctx.realize(result)
    if isinstance(result, IRNode) and not isinstance(result, (Buffer, ReinterpretView)):
        if node in outputs and node in ctx.saved_outputs:
            result = ctx.realize(result)  # a saved value: in the graph's own layout (see lower)
        elif node in outputs:
            result = _realize_output(ctx, result, val)
        elif len(node.users) > 1 and not ctx.should_inline(result):
            result = ctx.realize(result)
        elif _inline_depth(ctx, result, args) > ctx.max_inline_depth:
            result = ctx.realize(result)  # keep kernel bodies (and the cost of tracing them) bounded
    return result


def _item(ctx: LoweringContext, node: torch.fx.Node, env: dict[torch.fx.Node, Any]) -> sympy.Expr:
    """``aten._local_scalar_dense`` (``Tensor.item()``): a call whose number binds its unbacked symbol."""
    args = _as_arg(ctx, torch.fx.map_arg(node.args, lambda n: ctx.stored(env[n])))
    device = _first_device(args) or "cpu"
    kernel = FallbackKernel(ctx.new_name(), Layout(device, torch.uint8, (), ()), node.target, args, {},
                            output_is_tuple=True)
    ctx.register(kernel)
    return bind_scalar(ctx.program, kernel, node.meta.get("val"))


def _shape_env_of(val: Any) -> Any:
    """The ShapeEnv of the symbolic sizes in ``val`` (None if it has none)."""
    for leaf in pytree.tree_leaves(val):
        for size in leaf.shape if isinstance(leaf, torch.Tensor) else ():
            shape_env = getattr(getattr(size, "node", None), "shape_env", None)
            if shape_env is not None:
                return shape_env
    return None


def _touches_complex(node: torch.fx.Node) -> bool:
    """Whether the op reads or makes a complex tensor. Generated kernels compute on real values only;
    complex tensors are buffers that ATen calls (``FallbackKernel``) make and read, views included."""
    values = [node.meta.get("val"), *(n.meta.get("val") for n in node.all_input_nodes)]
    return any(isinstance(v, torch.Tensor) and v.is_complex() for v in pytree.tree_leaves(values))


_MAX_ORIGINS = 8


def _merge_origins(result: Any, args: Any) -> None:
    """Give a new Pointwise/Reduction the op names of the unrealized values it inlines (for kernel
    names such as ``fused_sin_cos_add``): producers first, then its own op."""
    if not isinstance(result, (Pointwise, Reduction)):
        return
    merged: list[str] = []
    for value in _leaves(args):
        for _ in range(4):  # through a few unrealized views to the computation they wrap
            if isinstance(value, (Pointwise, Reduction)):
                merged.extend(value.origins)
                break
            if not isinstance(value, IRNode) or isinstance(value, (Buffer, ReinterpretView)):
                break
            value = getattr(value, "data", None)
    if merged:
        result.origins = tuple(dict.fromkeys([*merged, *result.origins]))[:_MAX_ORIGINS]


def _leaves(value: Any) -> Iterator[Any]:
    """The leaves of nested lists, tuples and dicts (what FX node arguments are made of)."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    else:
        yield value


def _inline_depth(ctx: LoweringContext, result: IRNode, args: Any) -> int:
    """How many unrealized FX nodes ``result`` inlines along its longest chain (memoized per value)."""
    deepest = 0
    for value in _leaves(args):
        if isinstance(value, IRNode) and not isinstance(value, (Buffer, ReinterpretView)):
            deepest = max(deepest, ctx.inline_depth.get(id(value), 1))
    ctx.inline_depth[id(result)] = deepest + 1
    return deepest + 1


def _user_location(node: torch.fx.Node) -> str:
    """`` at file:line`` of the user's code that produced ``node``, when FX recorded it."""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    return f" at {lines[-1]}" if lines else ""


def _output_stride(program: Program, val: Any) -> tuple[sympy.Expr, ...] | None:
    """The strides FX recorded for an output, when no two elements share memory (checked on size
    hints, no guards). They may leave gaps: a slice of a wider value (a GRU gate split from the
    input projection) is stored with its recorded strides, in a buffer of the extent they span."""
    if not isinstance(val, torch.Tensor):
        return None
    return _dense_stride(program, [sympify_int(s) for s in val.shape], [sympify_int(s) for s in val.stride()])


def _expanded_dims(program: Program, val: Any) -> list[int]:
    """The dims of an output FX recorded as expanded (stride 0, more than one element)."""
    if not isinstance(val, torch.Tensor):
        return []
    try:
        return [d for d, (n, st) in enumerate(zip(val.shape, val.stride()))
                if sympify_int(st) == 0 and program.hint(sympify_int(n)) > 1]  # fmt: skip
    except (TypeError, ValueError):
        return []


def _recorded(val: Any, value: IRNode) -> torch.Tensor | None:
    """The tensor FX recorded for an output, if it has the output's rank (a gradient's may not:
    index_put's backward gives a 0-d value a gradient of shape (rows,), which autograd sums)."""
    return val if isinstance(val, torch.Tensor) and val.dim() == len(value.get_size()) else None


def _realize_output(ctx: LoweringContext, value: IRNode, val: Any) -> IRNode:
    """Store a graph output with the strides FX recorded for it.

    An output eager returns expanded (``(a * 2).expand(2, 3)``: rows sharing memory) is stored once,
    without its expanded dims, and returned as a view with stride 0 there: a write into the result
    reaches every row, and an in-place op on it raises eager's overlap error.
    """
    val = _recorded(val, value)
    stride = _output_stride(ctx.program, val)
    expanded = _expanded_dims(ctx.program, val) if stride is None else []
    if not expanded:
        return ctx.realize(value, stride)
    size = tuple(sympify_int(s) for s in val.shape)
    recorded = tuple(sympify_int(s) for s in val.stride())
    base_size = tuple(sympy.Integer(1) if d in expanded else n for d, n in enumerate(size))
    base_stride = _dense_stride(ctx.program, list(base_size), [sympy.Integer(1) if d in expanded else st
                                                               for d, st in enumerate(recorded)])  # fmt: skip
    if base_stride is None:
        return ctx.realize(value, None)  # overlapping in other ways too: a dense copy
    load = value.make_loader()

    def first_row(index: Sequence[sympy.Expr]) -> Any:
        return load([sympy.Integer(0) if d in expanded else i for d, i in enumerate(index)])

    base = ctx.realize(Pointwise(first_row, base_size, value.dtype, value.device, ("expand",)), base_stride)
    if not _same_expanded_strides(base.layout, base_stride):
        base = ctx.realize(Pointwise(base.make_loader(), base_size, value.dtype, value.device, ("clone",)), base_stride)
    data = base.data if isinstance(base, ReinterpretView) else base
    stride = tuple(sympy.Integer(0) if d in expanded else st for d, st in enumerate(base.layout.stride))
    return ReinterpretView(data, Layout(base.layout.device, base.layout.dtype, size, stride, base.layout.offset))


def _dense_stride(program: Program, size: list[sympy.Expr], stride: list[sympy.Expr]) -> tuple[sympy.Expr, ...] | None:
    """``stride`` when no two elements of ``size`` share memory with it; otherwise None."""
    if not all(isinstance(s, (int, sympy.Integer)) or _plain_arithmetic(s) for s in stride):
        return None  # e.g. ``Max(1, s0)``: the buffer's own strides are those, in a form code can print
    try:
        pairs = sorted((program.hint(st), program.hint(sz)) for st, sz in zip(stride, size) if program.hint(sz) != 1)
    except (TypeError, ValueError):
        return None
    if any(sz == 0 for _, sz in pairs):
        return None
    extent = 1  # elements the dims with smaller strides span
    for st, sz in pairs:
        if st < extent:
            return None  # overlapping (an expanded dim): any layout reads the same values
        extent = st * sz
    return tuple(stride)


def _plain_arithmetic(expr: sympy.Expr) -> bool:
    """Whether ``expr`` is made of symbols, integers, sums, products, positive integer powers and
    floor divisions by positive integers (a pooling's output size, ``(s - 1) // 2 + 1``, in the
    strides of a channels-last result)."""
    return all(
        isinstance(e, (sympy.Symbol, sympy.Integer, sympy.Add, sympy.Mul))
        or (isinstance(e, sympy.Pow) and e.exp.is_Integer and e.exp > 0)
        or (isinstance(e, FloorDiv) and isinstance(e.args[1], sympy.Integer) and e.args[1] > 0)
        for e in sympy.preorder_traversal(expr)
    )


def _same_expanded_strides(layout: Layout, stride: Sequence[sympy.Expr]) -> bool:
    """Whether ``layout`` has ``stride`` for every size (as polynomials), ignoring size-1 dims."""
    return all(n == 1 or sympy.expand(a - b) == 0 for n, a, b in zip(layout.size, layout.stride, stride))


def _lower_output(ctx: LoweringContext, value: Any, env: dict[torch.fx.Node, Any], free: bool = False) -> Any:
    """A graph output, stored with the strides FX recorded for it.

    A training forward's outputs are the backward graph's inputs, and the backward was compiled
    for the recorded strides (its wrapper does not check them again): an output left in another
    layout (a view of an unrealized value realized contiguous) would be read at wrong offsets.
    A ``free`` output of a channels-last graph (a saved value, see ``free_layout_outputs``) keeps
    the layout it has here: the backward graph is compiled for it.
    """
    node = value if isinstance(value, torch.fx.Node) else None
    if node is not None:
        value = env[node]
    if not isinstance(value, IRNode):
        return value
    val = _recorded(node.meta.get("val") if node is not None else None, value)
    if free and ctx.channels_last and not _expanded_dims(ctx.program, val):
        return ctx.realize(value)
    if _expanded_dims(ctx.program, val) and not isinstance(value, (Buffer, ReinterpretView)):
        return _realize_output(ctx, value, val)
    stride = _output_stride(ctx.program, val)
    result = ctx.realize(value, stride)
    if stride is None or _same_expanded_strides(result.layout, stride):
        return result
    layout = result.layout
    copy = Pointwise(result.make_loader(), layout.size, layout.dtype, layout.device, ("clone",))
    return ctx.realize(copy, stride)


def _as_arg(ctx: LoweringContext, value: Any) -> Any:
    if isinstance(value, IRNode):
        return ctx.realize(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_as_arg(ctx, v) for v in value)
    return value


# Ops whose result depends on where the elements of their first argument lie in memory.
_STORAGE_DEPENDENT = frozenset([_aten.as_strided.default, _aten.as_strided_scatter.default])


def fallback(ctx: LoweringContext, op: Any, args: Any, kwargs: dict[str, Any], val: Any) -> Any:
    """A ``FallbackKernel`` running ``op`` as itself; returns its output value(s)."""
    if op in _STORAGE_DEPENDENT and args and isinstance(args[0], IRNode):
        args = (with_eager_storage(ctx, args[0]), *args[1:])
    if op in ATTENTION_FALLBACK_OPS and ctx.node is not None:
        args = store_in_recorded_layouts(ctx, tuple(args))
    args = _as_arg(ctx, tuple(args))
    kwargs = {k: _as_arg(ctx, v) for k, v in kwargs.items()}
    if val is None:
        val = _meta_result(ctx.program, op, args, kwargs)
    # Arguments stored in other layouts than FX recorded: the results' layouts come from a fake run on
    # them (else every result the op returns in another layout is copied by `ensure_layout`).
    layouts = None
    if ctx.node is not None and arguments_moved(ctx.node.args, args) and op not in _STORAGE_DEPENDENT:
        layouts = fake_result_layouts(op, args, kwargs)
    if isinstance(val, torch.Tensor):
        layout = _layout(val, args)
        found = layouts[0] if layouts and len(layouts) == 1 else None
        if found is not None and tuple(found.size) == tuple(layout.size) and found.dtype == layout.dtype:
            layout = found
        kernel = FallbackKernel(ctx.new_name(), layout, op, args, kwargs)
        ctx.register(kernel)
        return kernel
    device = _first_device(args) or "cpu"
    kernel = FallbackKernel(ctx.new_name(), Layout(device, torch.uint8, (), ()), op, args, kwargs, output_is_tuple=True)
    ctx.register(kernel)
    if isinstance(val, (list, tuple)):
        return _multi_outputs(ctx, kernel, val, (), args, layouts if layouts and len(layouts) == len(val) else None)
    return None


def _meta_result(program: Program, op: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """The op's result on meta tensors shaped like the arguments (graphs without ``meta['val']``)."""

    def to_meta(value: Any) -> Any:
        if isinstance(value, (Buffer, ReinterpretView)):
            layout = value.layout
            size = [program.hint(s) for s in layout.size]
            stride = [program.hint(s) for s in layout.stride]
            return torch.empty_strided(size, stride, dtype=layout.dtype, device="meta")
        if isinstance(value, sympy.Expr):
            return program.hint(value)
        if isinstance(value, (list, tuple)):
            return type(value)(to_meta(v) for v in value)
        return value

    try:
        return op(*to_meta(args), **{k: to_meta(v) for k, v in kwargs.items()})
    except Exception:
        return None


def _layout(value: torch.Tensor, args: Any) -> Layout:
    """``layout_of`` a result; meta results get the device of the arguments."""
    layout = layout_of(value)
    if layout.device == "meta":
        layout = Layout(_first_device(args) or "cpu", layout.dtype, layout.size, layout.stride)
    return layout


def _multi_outputs(
    ctx: LoweringContext, kernel: FallbackKernel, val: Any, path: tuple[int, ...], args: Any, layouts: Any = None
) -> Any:
    outs: list[Any] = []
    for k, item in enumerate(val):
        if isinstance(item, torch.Tensor):
            layout = layouts[k] if layouts is not None and layouts[k] is not None else None
            if layout is None or tuple(layout.size) != tuple(item.shape) or layout.dtype != item.dtype:
                layout = _layout(item, args)
            out = MultiOutput(ctx.new_name(), layout, kernel.name, (*path, k))
            ctx.register(out)
            outs.append(out)
        elif isinstance(item, (list, tuple)):
            outs.append(_multi_outputs(ctx, kernel, item, (*path, k), args))
        else:
            outs.append(item)
    return tuple(outs)


def _first_device(args: Any) -> str | None:
    for value in args:
        if isinstance(value, (Buffer, ReinterpretView)):
            return value.device
        if isinstance(value, (list, tuple)):
            found = _first_device(value)
            if found:
                return found
    return None
