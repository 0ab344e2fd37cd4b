"""Compiling one frame: trace its bytecode, hand the graph to the backend, build the cache entry.

`compile_frame` is the driver: a first pass traces until the function returns or a graph break;
on a break, a second pass stops just before the breaking instruction, and the entry runs the
graph, rebuilds Python state, and runs a break stub that continues in a resume function.
"""

from __future__ import annotations

import contextlib
import logging
import time
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.fx

from capture.bytecode.codegen import ORIGINS, popped_count, stack_effect, stub_code
from capture.bytecode.dialects import current
from capture.errors import BackendCompilerError, BreakReason, GraphBreakError, UserLocation
from capture.events import GraphBroken, GraphCompiled
from capture.guards import GUARD_NAMESPACE, GuardSet, compile_guards
from capture.sources import ClosureSource, LocalSource
from capture.symbolic.aliasing import guard_written_inputs
from capture.symbolic.code_info import code_info
from capture.symbolic.number_prelude import NumberPrelude
from capture.symbolic.output_graph import OutputGraph
from capture.symbolic.reconstruct import Reconstructor
from capture.symbolic.run_time_values import (
    Respecialize,
    callee_run_time_paths,
    run_time_paths,
    values_needed,
)
from capture.symbolic.shapes import ShapePolicy, first_use_location, shape_guards
from capture.symbolic.translator import BreakPoint, FirstBreak, InstructionTranslator, StoppedAt
from capture.variables.base import NullVariable, VariableTracker
from capture.variables.containers import DictVariable, ListVariable
from capture.variables.functions import NestedFunctionVariable, RealCellVariable
from capture.variables.rebuilding import CannotReconstruct

if TYPE_CHECKING:
    from capture.context import CaptureContext

log = logging.getLogger("capture")
EntryFn = Callable[[Any, Any, Any], Any]


@dataclass
class Frame:
    """A call about to run: the function, its code, argument values (L), globals (G), closure (C)."""

    fn: types.FunctionType
    L: tuple[Any, ...] | list[Any]
    G: dict[str, Any]
    C: tuple[Any, ...] | None

    @property
    def code(self) -> types.CodeType:
        """The function's code object."""
        return self.fn.__code__


@dataclass
class CompiledFrame:
    """What a compile produced: guards and entry, plus what explain/export report."""

    guard_set: GuardSet
    check: Callable[[Any, Any, Any], bool]
    run: EntryFn
    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    break_reason: BreakReason | None = None


class UserCodeError(Exception):
    """nopython found code that raises in eager too: run eagerly to raise the user's own error."""


def compile_frame(frame: Frame, ctx: CaptureContext) -> CompiledFrame:
    """Trace `frame` and build its cache entry (raises GraphBreakError under nopython)."""
    started = time.perf_counter()
    while True:
        try:
            return _compile_frame(frame, ctx, started)
        except Respecialize as needed:  # number arguments read as inputs whose values the trace needs
            state = ctx.cache.state(frame.code, ctx)
            log.info("capture: %s needs the values of %s: they stay specialized", frame.code.co_name, needed)
            assert not needed.paths & state.specialized_numbers
            state.specialized_numbers.update(needed.paths)


def _compile_frame(frame: Frame, ctx: CaptureContext, started: float) -> CompiledFrame:
    try:
        output, result, _ = trace_frame(frame, ctx, None)
    except FirstBreak as first:
        reason = BreakReason(first.reason, tuple(first.user_stack))
        if ctx.nopython:
            if first.user_error:
                raise UserCodeError(first.reason) from None
            raise GraphBreakError(reason) from None
        ctx.hooks.graph_break(GraphBroken(frame.code.co_name, reason))
        if ctx.config.verbose:
            log.info("graph break in %s: %s", frame.code.co_name, reason)
        why_not = _cannot_resume(frame.code, first.index, first.open_grad_blocks) if first.resumable else first.reason
        # A break below a call of this frame: if the frame runs eagerly, it still captures that call's callee.
        call_site = (first.index, first.null_below) if len(first.user_stack) > 1 else None
        if why_not is not None:
            raise CannotResume(f"{why_not}; running {frame.code.co_name} eagerly", call_site) from None
        output, result, tx = trace_frame(frame, ctx, BreakPoint(first.index, first.visit))
        assert isinstance(result, StoppedAt)
        try:
            compiled = build_entry(frame, ctx, output, result, tx, started)
        except CannotResume as error:
            raise CannotResume(str(error), call_site) from None
        compiled.break_reason = reason
        return compiled
    assert not isinstance(result, StoppedAt)
    return build_entry(frame, ctx, output, result, None, started)


class CannotResume(Exception):
    """The frame broke where no resume function can be made: it runs eagerly.

    `call_site`: (instruction index, NULL below the callable) of the frame's call whose callee broke,
    which the eager run still sends through capture; None when the break was in the frame itself.
    """

    def __init__(self, message: str, call_site: tuple[int, bool | None] | None = None) -> None:
        super().__init__(message)
        self.call_site = call_site


def _original_index(code: types.CodeType, index: int) -> tuple[types.CodeType, int]:
    origin = ORIGINS.get(code)
    if origin is None:
        return code, index
    return origin.original, origin.original_index(index)


def _cannot_resume(code: types.CodeType, index: int, open_grad_blocks: int = 0) -> str | None:
    original, original_index = _original_index(code, index)
    info = code_info(original)
    instr = info.instructions[original_index]
    # Inside grad-mode with-blocks is fine (the resumed code keeps their cleanup); inside try/except is not.
    if len(info.handlers.get(original_index, ())) > open_grad_blocks:
        return "graph break inside a try block (or a with block other than torch.no_grad/enable_grad)"
    if instr.name in ("FOR_ITER", "LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_DEREF", "STORE_DEREF",
                      "LOAD_CLOSURE", "MAKE_CELL", "BEFORE_WITH", "LOAD_FAST_AND_CLEAR", "END_FOR"):
        return f"graph break at {instr.name}"
    if _inside_loop(info, original_index):
        # Resuming inside a loop would compile one graph per iteration (TorchDynamo skips such frames too).
        return "graph break inside a for/while loop"
    return None


def _inside_loop(info: Any, index: int) -> bool:
    """True when a backward jump at or after `index` lands at or before it."""
    for position in range(index, len(info.instructions)):
        instr = info.instructions[position]
        if type(instr.arg).__name__ == "Label" and "BACKWARD" in instr.name and info.target(instr) <= index:
            return True
    return False


def trace_frame(frame: Frame, ctx: CaptureContext,
                break_point: BreakPoint | None) -> tuple[OutputGraph, VariableTracker | StoppedAt, InstructionTranslator]:
    """One symbolic pass over the frame's bytecode."""
    code = frame.code
    automatic = None if ctx.export else ctx.cache.state(code, ctx).automatic
    policy = ShapePolicy(dynamic=False if ctx.export else ctx.dynamic, automatic=automatic)
    output = OutputGraph(ctx.config, frame.G, export=ctx.export, policy=policy)
    nargs = _total_args(code)
    local_values: dict[str, VariableTracker] = {}
    if not ctx.export:
        state = ctx.cache.state(code, ctx)
        numbers = state.number_paths()
        output.run_time_sources = frozenset(state.data_arguments) | numbers
        output.varying_sources = frozenset(state.varying_data) | numbers
        output.number_sources = numbers
    for index, name in enumerate(code.co_varnames[:nargs]):
        value = frame.L[index]
        if ctx.export and not isinstance(value, torch.Tensor):
            output.graph.placeholder(name)
        # Guards on an argument are installed by the line that first reads it.
        output.location_override = first_use_location(code, name)
        local_values[name] = output.wrap_value(value, LocalSource(index, name))
    output.location_override = None
    cells: dict[str, VariableTracker] = {}
    if code in ORIGINS:
        arg_names = code.co_varnames[:nargs]
        for name in code.co_cellvars:
            if name in arg_names:
                index = arg_names.index(name)
                cells[name] = output.cell_tracker(frame.L[index], LocalSource(index, name))
                local_values.pop(name, None)
    for index, name in enumerate(code.co_freevars):
        cell = (frame.C or ())[index]
        cells[name] = output.cell_tracker(cell, ClosureSource(index, name))
    tx = InstructionTranslator(output, code, frame.G, local_values, cells, break_point=break_point)
    try:
        result = tx.run_root()
    except FirstBreak as first:
        needed = values_needed(output, first)
        if needed:
            raise Respecialize(needed) from None
        raise
    needed = values_needed(output, None)
    if needed:
        raise Respecialize(needed)
    return output, result, tx


def _total_args(code: types.CodeType) -> int:
    n = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & 0x04:
        n += 1
    if code.co_flags & 0x08:
        n += 1
    return n


def build_entry(frame: Frame, ctx: CaptureContext, output: OutputGraph, result: VariableTracker | StoppedAt,
                tx: InstructionTranslator | None, started: float) -> CompiledFrame:
    """Finish the graph, compile it with the backend, and generate the entry function."""
    namespace: dict[str, Any] = dict(GUARD_NAMESPACE)
    namespace.update(output.guards.constants)
    graph_inputs = {graph_input.node for graph_input in output.inputs}
    # Symbolic sizes are the inputs' sizes on entry: read before the graph runs (it may resize an input in place).
    size_reads: dict[str, str] = {}
    rebuild = Reconstructor(namespace, graph_inputs, render_symbolic=lambda expr: output.symbols.render(
        expr, lambda reader: size_reads.setdefault(reader, f"__z{len(size_reads)}")))
    numbers = NumberPrelude(output, rebuild.constant)
    rebuild.render_number = numbers.render
    body: list[str] = []
    try:
        tail = _tail(frame, ctx, output, result, rebuild)
        body += _side_effect_lines(output, rebuild)
    except CannotReconstruct as error:
        raise CannotResume(str(error)) from None
    graphs: list[torch.fx.GraphModule] = []
    call_line = ""
    output.remove_dead_size_nodes()  # sizes the program only used in Python are read from the inputs
    if rebuild.outputs or output.has_ops():
        gm, call_line = _compile_graph(frame, ctx, output, rebuild, numbers, namespace, started)
        if gm is not None:
            graphs.append(gm)
    _add_shape_guards(frame, output)  # (again, for a frame whose graph had no ops: no backend ran)
    output.guard_distinct_objects()  # objects the region writes, and others it reads, stay distinct
    source = "def __entry(L, G, C):\n"
    source += "".join(f"    {name} = {reader}\n" for reader, name in size_reads.items())
    if call_line:
        source += f"    {call_line}\n"
    if output.grad_enabled != output.initial_grad_enabled:
        # The region ends in another grad mode (cut inside `with torch.no_grad():`): what follows runs in it.
        # Set here, not left to the graph: a backend (aotgrad) restores the mode its graph was called in.
        source += f"    {rebuild.constant(torch._C._set_grad_enabled)}({output.grad_enabled})\n"
    for line in rebuild.prelude + body:
        source += f"    {line}\n"
    source += f"    return {tail}\n"
    exec(compile(source, f"<capture entry for {frame.code.co_name}>", "exec"), namespace)
    entry: EntryFn = namespace["__entry"]
    output.guards.locate = None  # the entry keeps its guards, not the trace they point back into
    return CompiledFrame(output.guards, compile_guards(output.guards), entry, graphs)


def _tail(frame: Frame, ctx: CaptureContext, output: OutputGraph, result: VariableTracker | StoppedAt,
          rebuild: Reconstructor) -> str:
    if not isinstance(result, StoppedAt):
        return rebuild.expr(result)
    code, index = _original_index(frame.code, result.index)
    info = code_info(code)
    instr = info.instructions[index]
    live = info.live_in[index]
    cell_names = tuple(name for name in code.co_cellvars if name in result.cells)
    keep = _receiver_of_super(code)
    local_names = _receiver_first(tuple(name for name in result.locals if (name in live or name == keep)
                                        and name not in cell_names) + cell_names, keep)
    stack = result.stack
    # The callee of a call that broke the graph is captured on its own when the stub calls it.
    callee_slots, consumed_null = _call_slots(instr, stack)
    wrap_name = rebuild.constant(ctx.wrap_callee)
    local_exprs = [rebuild.expr(result.cells[name]) if name in cell_names else rebuild.expr(result.locals[name])
                   for name in local_names]
    stack_exprs = [rebuild.expr(value, wrap_callee=wrap_name if i in callee_slots else None)
                   for i, value in enumerate(stack)]
    kw_names = _pending_kw_names(info, index)
    if callee_slots:
        callee = callee_run_time_paths(output, instr.name, int(cast(Any, instr.arg)), stack, kw_names)
        if callee is not None:  # the callee's arguments that hold run-time data
            state = ctx.cache.state(callee[0], ctx)
            state.data_arguments.update(callee[1].data)
            state.varying_data.update(callee[1].varying)
            state.number_arguments.update(callee[1].numbers)
    resumes: dict[str, tuple[Any, int, tuple[str, ...]]] = {}
    depth = len(stack)
    successors = [("next", index + 1, False)]
    if hasattr(instr.arg, "__class__") and type(instr.arg).__name__ == "Label":
        successors.append(("jump", info.target(instr), True))
    if instr.name in ("RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "JUMP_FORWARD", "JUMP_BACKWARD"):
        successors = [s for s in successors if s[0] == "jump"]
    for kind, target, jumped in successors:
        after = depth + stack_effect(instr, jumped)
        names = tuple(name for name in local_names if name in info.live_in[target] or name in cell_names
                      or name == keep) if target < len(info.instructions) else cell_names
        kept = depth - popped_count(instr, jumped)  # the slots below what the instruction consumes
        nulls = frozenset(i for i, value in enumerate(stack[:kept]) if isinstance(value, NullVariable))
        passed = [result.cells[name] if name in cell_names else result.locals.get(name) for name in names]
        cell_arguments = {i for i, name in enumerate(names) if name in cell_names}
        data = run_time_paths(output, [*passed, *stack[:kept], *[None] * (after - kept)], cell_arguments,
                              len(names) + kept)
        resumes[kind] = (ctx.resume_function(code, target, after, names, frame.G, frame.C, nulls, data), after, names)
    # A closure's resume functions run over the cells of each call (`C`), not of the call compiled here.
    closure = frame.C is not None
    stub = types.FunctionType(stub_code(code, index, depth, local_names, kw_names, resumes, consumed_null, closure),
                              frame.G, f"break_in_{code.co_name}")
    args = ", ".join([*stack_exprs, *local_exprs, *(["C"] if closure else [])])
    call = f"{rebuild.constant(stub)}({args})"
    if result.grad_blocks:
        # If the rest raises, leave grad mode as the with-blocks' exits would have.
        outer = result.grad_blocks[0].previous
        return f"{rebuild.constant(call_restoring_grad_mode)}(lambda: {call}, {outer})"
    return call


def _receiver_of_super(code: types.CodeType) -> str | None:
    """The first argument of a method that may call zero-argument super() (CPython reads it as `self`).

    It is kept alive across a break even where no instruction reads it, and passed first to resume functions.
    """
    if "__class__" in code.co_freevars and code.co_argcount:
        return code.co_varnames[0]
    return None


def _receiver_first(names: tuple[str, ...], receiver: str | None) -> tuple[str, ...]:
    if receiver is None or receiver not in names:
        return names
    return (receiver, *(name for name in names if name != receiver))


def _call_slots(instr: Any, stack: list[VariableTracker]) -> tuple[set[int], frozenset[int]]:
    """For a call instruction: the stack slot of its callable, and its NULL slot if it has one.

    CALL's (and CALL_KW's) two slots below the arguments hold the callable and a NULL, in the dialect's
    order, or a method and its `self`; CALL_FUNCTION_EX's callable sits below the argument tuple (and the
    keyword dict), next to a NULL.
    """
    dialect = current()
    depth = len(stack)
    if instr.name == "CALL":
        base = depth - int(cast(Any, instr.arg)) - 2
    elif instr.name == "CALL_KW":
        base = depth - int(cast(Any, instr.arg)) - 3
    elif instr.name == "CALL_FUNCTION_EX":
        base = depth - 3 - (int(cast(Any, instr.arg)) & 1)
    else:
        return set(), frozenset()
    if base < 0:
        return set(), frozenset()
    null = dialect.null_slot(base)
    if isinstance(stack[null], NullVariable):
        return {dialect.callable_slot(base)}, frozenset({null})
    if instr.name == "CALL_FUNCTION_EX":
        return {dialect.callable_slot(base)}, frozenset()
    return {base}, frozenset()  # a method and its `self`: never wrap CALL's `self`


def call_restoring_grad_mode(run: Callable[[], Any], previous: bool) -> Any:
    """Run the rest of a function cut inside grad-mode with-blocks; on an exception, restore grad mode."""
    try:
        return run()
    except BaseException:
        torch._C._set_grad_enabled(previous)
        raise


def _pending_kw_names(info: Any, index: int) -> tuple[str, ...]:
    for back in range(index - 1, max(index - 3, -1), -1):
        instr = info.instructions[back]
        if instr.name == "KW_NAMES":
            names = instr.arg
            return tuple(info.code.co_consts[names]) if isinstance(names, int) else tuple(names)
        if instr.name not in ("PRECALL",):
            break
    return ()


def _side_effect_lines(output: OutputGraph, rebuild: Reconstructor) -> list[str]:
    """Replay lines: every new value is computed first, then the mutations are applied."""
    effects = output.side_effects
    values: list[str] = []
    applies: list[str] = []

    def value(expr: str) -> str:
        name = f"__s{len(values)}"
        values.append(f"{name} = {expr}")
        return name

    for container in effects.containers:
        assert container.source is not None
        target = container.source.expr()
        if isinstance(container, ListVariable) and container.is_unread:  # only appended to
            rendered = value("[" + ", ".join(rebuild.expr(v) for v in container.appended) + "]")
            applies.append(f"{target}.extend({rendered})")
            continue
        if isinstance(container, DictVariable) and container.is_unread:  # only assigned items to
            rendered = value("{" + ", ".join(f"{rebuild.constant(k)}: {rebuild.expr(v)}"
                                             for k, v in container.assigned.items()) + "}")
            applies.append(f"{target}.update({rendered})")
            continue
        items = cast(Any, container).items
        if isinstance(items, dict):
            rendered = value("{" + ", ".join(f"{rebuild.constant(k)}: {rebuild.expr(v)}" for k, v in items.items()) + "}")
            applies.append(f"__d = {target}; __d.clear(); __d.update({rendered})")
        else:
            rendered = value("[" + ", ".join(rebuild.expr(v) for v in items) + "]")
            applies.append(f"__l = {target}; __l.clear(); __l.extend({rendered})")  # a list or a deque
    for owner, name, stored in effects.attribute_stores:
        applies.append(f"setattr({rebuild.expr(owner)}, {name!r}, {value(rebuild.expr(stored))})")
    for name, stored in effects.global_stores.items():
        if isinstance(stored, NestedFunctionVariable):
            raise CannotReconstruct("storing a closure made in the region to a global")
        applies.append(f"G[{name!r}] = {value(rebuild.expr(stored))}")
    for cell in effects.cells:
        assert isinstance(cell, RealCellVariable) and cell.pending is not None and cell.source is not None
        target = cell.source.expr()
        if not target.endswith("cell_contents"):
            target += ".cell_contents"
        applies.append(f"{target} = {value(rebuild.expr(cell.pending))}")
    return values + applies


def _compile_graph(frame: Frame, ctx: CaptureContext, output: OutputGraph, rebuild: Reconstructor,
                   numbers: NumberPrelude, namespace: dict[str, Any],
                   started: float) -> tuple[torch.fx.GraphModule | None, str]:
    graph = output.graph
    graph.output(tuple(rebuild.outputs))
    numbers.hoist()  # Python arithmetic on number inputs that tensor ops use: computed by the entry, as eager does
    aliased = [] if ctx.export else guard_written_inputs(output.guards, output.inputs)
    if not ctx.export:
        for graph_input in list(output.inputs):
            if not graph_input.node.users:
                graph.erase_node(graph_input.node)
                output.inputs.remove(graph_input)
    call_under_grad = _starts_without_grad_then_enables(output)
    gm = torch.fx.GraphModule(output.root, graph, class_name="GraphModule")
    inputs = ", ".join(graph_input.source.expr() for graph_input in output.inputs)
    call = f"__o = __graph({inputs})"
    if call_under_grad:
        call = f"{rebuild.constant(torch._C._set_grad_enabled)}(True); {call}"
    # With symbolic sizes the backend gets fake tensors of the capture's ShapeEnv (sizes s0, s1, ...),
    # so it compiles one graph for every size; static graphs get the real tensors of this call.
    example_inputs = output.backend_example_inputs()
    if not output.has_ops():
        namespace["__graph"] = gm.forward
        return None, call
    capture_seconds = time.perf_counter() - started
    backend_started = time.perf_counter()
    try:
        # Compiled in the grad mode it is called in: a backend may decide from it, when compiling, whether the
        # graph needs a backward (an inference compile under no_grad drops the gradients of the ops after the block).
        with torch.enable_grad() if call_under_grad else contextlib.nullcontext():
            compiled = _run_captured(frame, gm, aliased) if aliased else ctx.backend(gm, example_inputs)
    except Exception as error:
        raise BackendCompilerError(
            f"the backend {getattr(ctx.backend, '__name__', ctx.backend)!r} failed on the graph of "
            f"{frame.code.co_name} ({frame.code.co_filename}:{frame.code.co_firstlineno}): "
            f"{type(error).__name__}: {error}") from error
    backend_seconds = time.perf_counter() - backend_started
    namespace["__graph"] = compiled
    _add_shape_guards(frame, output)
    guards = tuple(f"{g}  (from {g.where()})" if g.where() else str(g) for g in output.guards.guards)
    ctx.hooks.graph(GraphCompiled(frame.code.co_name, frame.code.co_filename, frame.code.co_firstlineno, gm,
                                  example_inputs, guards, capture_seconds, backend_seconds))
    if ctx.config.verbose:
        log.info("captured graph for %s:\n%s", frame.code.co_name, gm.code)
    return gm, call


def _starts_without_grad_then_enables(output: OutputGraph) -> bool:
    """For a graph that starts under no_grad and enables grad inside: make it start by disabling grad.

    A backend decides from the grad mode it is compiled and called in whether outputs can require grad
    (aotgrad compiles an inference graph under no_grad), so such a graph is compiled and called with grad
    mode on and switches it off itself first. Returns True when the graph was changed so.
    """
    graph = output.graph
    if output.initial_grad_enabled or not any(
            node.op == "call_function" and node.target is torch._C._set_grad_enabled and node.args == (True,)
            for node in graph.nodes):
        return False
    first = next(node for node in graph.nodes if node.op != "placeholder")
    with graph.inserting_before(first):
        graph.call_function(torch._C._set_grad_enabled, (False,))
    return True


def _run_captured(frame: Frame, gm: torch.fx.GraphModule, aliased: list[list[str]]) -> Callable[..., Any]:
    """The graph as captured, for inputs that share memory and are written to (backends assume they do not)."""
    code = frame.code
    shared = "; ".join(", ".join(group) for group in aliased)
    warnings.warn_explicit(
        f"capture: the inputs {shared} of {code.co_name} share memory and the graph writes to them; for calls where "
        "they share memory this graph runs op by op (as eager), not compiled. Pass separate tensors (e.g. "
        "`.clone()`) to have it compiled.", RuntimeWarning, code.co_filename, code.co_firstlineno)
    return gm.forward


def _add_shape_guards(frame: Frame, output: OutputGraph) -> None:
    """The size guards of a graph with symbolic sizes (idempotent).

    Called after the backend compiled the graph: it traced with the same ShapeEnv and may have
    added guards (charged to the function's definition line).
    """
    if output.is_dynamic:
        backend = UserLocation(frame.code.co_filename, frame.code.co_firstlineno, frame.code.co_name)
        shape_guards(output.symbols, output.guards, backend)
