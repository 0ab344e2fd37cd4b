"""explain(): what capture does with a function; export(): one whole graph or an error."""

from __future__ import annotations

import functools
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast, overload

import torch
import torch.fx

from capture.cache import CodeCache
from capture.config import CaptureConfig, config
from capture.context import CaptureContext, wrap_for_capture
from capture.convert_frame import Frame, trace_frame
from capture.errors import BreakReason, GraphBreakError
from capture.events import CaptureHooks, GraphCompiled, Recompiled
from capture.guards import Guard
from capture.symbolic.output_graph import _unpack
from capture.symbolic.translator import FirstBreak, StoppedAt


@dataclass
class ExplainOutput:
    """What happened when capturing one call.

    Attributes:
        graphs: the captured graphs, in the order they were compiled.
        graph_count, graph_break_count: how many graphs and graph breaks.
        break_reasons: why each break happened, with the user's file:line and source line.
        ops_per_graph: the call targets of each graph.
        guards: the guards of every compiled entry (each with the user line that installed it).
        compile_seconds: total time spent capturing and compiling.
        result: the function's return value for this call.
        recompile_reasons: recompilations during the call (a resume function called again in a
            loop): the guard that failed, its value, and the line that installed it.
    """

    graphs: list[torch.fx.GraphModule]
    graph_count: int
    graph_break_count: int
    break_reasons: list[BreakReason]
    ops_per_graph: list[list[Any]]
    guards: list[Guard]
    compile_seconds: float = 0.0
    result: Any = field(default=None, repr=False)
    recompile_reasons: list[Recompiled] = field(default_factory=list)

    @property
    def op_count(self) -> int:
        """Total number of ops over all graphs."""
        return sum(len(ops) for ops in self.ops_per_graph)

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}", "Break Reasons:"]
        for index, reason in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {index}:")
            lines.append(f"    Reason: {reason.reason}")
            lines.append("    User Stack:")
            for frame in reason.user_stack:
                lines.append(f"      <FrameSummary file {frame.filename}, line {frame.lineno} in {frame.function}>")
                lines.append(f"        {frame.source_line}")
        lines.append("Ops per Graph:")
        for index, ops in enumerate(self.ops_per_graph, 1):
            lines.append(f"  Ops {index}:")
            lines += [f"    {op_name(op)}" for op in ops]
        lines.append("Out Guards:")
        for index, guard in enumerate(self.guards, 1):
            lines.append(f"  Guard {index}:")
            lines.append(f"    Kind: {guard.kind}")
            lines.append(f"    Check: {guard.description}")
            if guard.where():
                lines.append(f"    Installed at: {guard.where()}")
        if self.recompile_reasons:
            lines.append("Recompiles:")
            lines += [f"  {event.describe()}" for event in self.recompile_reasons]
        lines.append(f"Compile Time: {self.compile_seconds:.4f} s")
        return "\n".join(lines) + "\n"


def op_name(target: Any) -> str:
    """How explain() prints a graph's call target: ``torch.abs``, ``operator.add``, or a method's name."""
    if isinstance(target, str):
        return target  # a Tensor method or a submodule
    try:
        name = torch.fx.node._get_qualified_name(target)
    except Exception:  # an object FX cannot name: its own repr
        return repr(target)
    return "operator." + name.removeprefix("_operator.") if name.startswith("_operator.") else name


def _ops(gm: torch.fx.GraphModule) -> list[Any]:
    return [node.target for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module")]


@overload
def explain(fn: Any) -> Callable[..., ExplainOutput]: ...
@overload
def explain(fn: Any, *args: Any, **kwargs: Any) -> ExplainOutput: ...
def explain(fn: Any, *args: Any, **kwargs: Any) -> ExplainOutput | Callable[..., ExplainOutput]:
    """Capture `fn(*args, **kwargs)` with a recording backend and report graphs, breaks and guards.

    Runs the function once (results are eager's); nothing is added to the global cache. Both call
    forms work: ``explain(fn, *args)`` (the seeds') returns the `ExplainOutput`; ``explain(fn)``
    returns a function taking the arguments (current torch's ``explain(fn)(*args)``), so
    ``explain(fn)()`` explains a function of no arguments.
    """
    if not args and not kwargs:
        return functools.wraps(fn)(lambda *call_args, **call_kwargs: _explain(fn, call_args, call_kwargs))
    return _explain(fn, args, kwargs)


def _explain(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ExplainOutput:
    events: list[GraphCompiled] = []
    breaks: list[BreakReason] = []
    hooks = CaptureHooks()
    hooks.on_graph.append(events.append)
    hooks.on_graph_break.append(lambda event: breaks.append(event.reason))
    recompiles: list[Recompiled] = []
    hooks.on_recompile.append(recompiles.append)
    cache = CodeCache()

    def recording_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
        return gm.forward

    ctx = CaptureContext(recording_backend, config=config, hooks=hooks, cache=cache)
    started = time.perf_counter()
    result = wrap_for_capture(fn, ctx)(*args, **kwargs)
    elapsed = time.perf_counter() - started
    graphs = [event.graph_module for event in events]
    guards = [guard for state in cache.states.values() for entry in state.entries
              for guard in entry.guard_set.guards]
    return ExplainOutput(graphs, len(graphs), len(breaks), breaks, [_ops(g) for g in graphs], guards,
                         sum(e.capture_seconds + e.backend_seconds for e in events) or elapsed, result,
                         recompiles)


class ExportResult(NamedTuple):
    """`export`'s result: the whole-program graph (called like the function) and its guards."""

    graph_module: torch.fx.GraphModule
    guards: list[Guard]


def export(fn: Any, *args: Any, capture_config: CaptureConfig | None = None, **kwargs: Any) -> ExportResult:
    """Capture `fn(*args, **kwargs)` as ONE graph; raises `GraphBreakError` on any graph break.

    The graph module takes the same positional arguments as `fn` (for a module: as its forward)
    and returns the same structure of tensors.
    """
    if kwargs:
        raise GraphBreakError(BreakReason("export takes positional arguments only"))
    target = getattr(fn, "_kiln_original", fn)
    if isinstance(target, torch.nn.Module):
        function = type(target).forward
        values: tuple[Any, ...] = (target, *args)
    elif isinstance(target, types.MethodType):
        function, values = target.__func__, (target.__self__, *args)
    elif isinstance(target, types.FunctionType):
        function, values = target, args
    else:
        raise GraphBreakError(BreakReason(f"cannot export a {type(target).__name__}"))
    ctx = CaptureContext(lambda gm, inputs: gm.forward, nopython=True, config=capture_config or config,
                         cache=CodeCache(), export=True)
    frame = Frame(cast(types.FunctionType, function), values, function.__globals__, function.__closure__)
    try:
        output, result, _ = trace_frame(frame, ctx, None)
    except FirstBreak as first:
        raise GraphBreakError(BreakReason(first.reason, tuple(first.user_stack))) from None
    assert not isinstance(result, StoppedAt)
    if output.side_effects.attribute_stores or output.side_effects.global_stores or output.side_effects.containers:
        raise GraphBreakError(BreakReason("export of a function with Python side effects"))
    node_result, _ = _unpack(result)
    output.graph.output(node_result)
    gm = torch.fx.GraphModule(output.root, output.graph, class_name="ExportedGraph")
    return ExportResult(gm, list(output.guards.guards))
