"""The ``inductor`` backend: aotgrad, then inductor_ir with a code generator per device.

Per graph: find its device (CPU -> codegen_cpp, CUDA -> codegen_triton, through the
``kiln.kernel_backends`` entry points); trace forward and backward with aotgrad using
inductor_ir's decompositions; compile each ATen graph with ``inductor_ir.compile_graph``; under
mode="reduce-overhead", replay the compiled graphs as CUDA graphs. A graph mixing devices, or one a
kernel backend cannot compile, runs eagerly instead (logged; ``fallback_to_eager=False`` raises).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

import sympy
import torch
import torch.utils._pytree as pytree

import inductor_ir
from aotgrad import is_boxed as aotgrad_is_boxed
from aotgrad.compile import OUTPUT_STRIDES_META, SAVED_OUTPUTS_META
from frontend.backends._aot import aot_compile, aot_config
from frontend.backends.fallback import (
    compile_or_fall_back,
    fall_back,
    graph_device_types,
    mixed_devices_reason,
    unboxed,
)
from frontend.backends.kernel_backends import (
    KernelBackendUnavailable,
    TimedKernelBackend,
    load_kernel_backend,
)
from frontend.backends.scalar_devices import place_cpu_scalars
from frontend.context import CompileContext
from frontend.cudagraphs import CudaGraphRunner
from frontend.debug import GraphArtifacts
from frontend.graph_cache import CachedCompile
from frontend.stats import move_seconds


def _write_compiled(artifacts: GraphArtifacts, prefix: str, compiled: Any) -> None:
    """Write what the compiled graph exposes (IR, kernel groups, kernels, wrapper) under `prefix/`."""
    texts = compiled.artifacts() if callable(getattr(compiled, "artifacts", None)) else {}
    for name, text in texts.items():
        artifacts.write(f"{prefix}/{name}", str(text))


def _record_split(context: CompileContext, compiled: Any) -> None:
    """Move inductor_ir's scheduling seconds out of the "lowering" lump.

    Kernel generation and compilation are already charged to "codegen" and "compile" by
    `TimedKernelBackend`, so only scheduling is taken from inductor_ir's own timings.
    """
    timings = getattr(compiled, "timings", None)
    seconds = getattr(timings, "scheduling", None)
    if isinstance(seconds, (int, float)):
        move_seconds(context.times, "lowering", {"scheduling": float(seconds)})


class _BoxedGraphRunner:
    """Runs a compiled graph called boxed (``runner(args)``, aotgrad's convention, see
    `aotgrad.runtime.boxed`): the list goes straight to the wrapper's ``call(args)``, which empties it
    and drops each input after its last use, so a backward's saved activations are freed as it goes
    (`CompiledGraph.__call__` would hold them all in its argument tuple to the end).

    With static shapes it skips `CompiledGraph`'s per-call input checks: aotgrad calls it only with
    inputs that match the region it was compiled for (its region key pins every input's dtype, shape
    and strides), so checking them again costs time for nothing. With symbolic sizes it checks them
    (the sizes the kernels were specialized on) before the wrapper takes the list.
    """

    boxed_call: Literal[True] = True

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self._call = compiled.call
        self._check = bool(compiled.program.size_sources) and compiled.check_inputs
        spec = compiled.program.output_spec
        self._spec = spec
        self._flat = spec is None or (
            spec.type in (tuple, list) and all(spec.child(i).is_leaf() for i in range(spec.num_children))
        )

    def __call__(self, args: list[Any]) -> Any:
        """Run the wrapper on the flat inputs (emptied); return its outputs (a tuple, or the graph's structure)."""
        if self._check:
            self.compiled._check_inputs(args)
        outputs = self._call(args)
        if self._flat:
            return outputs
        return pytree.tree_unflatten(list(outputs), self._spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.compiled, name)


def _saved_values(gm: torch.fx.GraphModule, saved: int) -> Iterator[tuple[int, torch.Tensor]]:
    """(output position, recorded value) of each of the last `saved` outputs that is a tensor."""
    (output,) = [n for n in gm.graph.nodes if n.op == "output"]
    flat = pytree.tree_leaves(output.args[0])
    for position in range(max(len(flat) - saved, 0), len(flat)):
        value = flat[position]
        val = value.meta.get("val") if isinstance(value, torch.fx.Node) else None
        if isinstance(val, torch.Tensor):
            yield position, val


def _changed_strides(
    gm: torch.fx.GraphModule, strides: list[tuple[int, ...] | None], saved: int
) -> dict[int, tuple[int, ...]]:
    """The saved outputs (by position) that the compiled graph returns in strides other than the recorded ones."""
    changed: dict[int, tuple[int, ...]] = {}
    for position, val in _saved_values(gm, saved):
        stride = strides[position] if position < len(strides) else None
        if stride is not None and tuple(val.stride()) != stride:
            changed[position] = stride
    return changed


def _symbolic_strides_changed(
    gm: torch.fx.GraphModule, strides: list[tuple[sympy.Expr, ...] | None], saved: int
) -> bool:
    """Whether a saved output comes back in strides other than the recorded ones that are symbolic
    (static ones are handed to the backward: `_changed_strides`). Dims of size 1 are not compared."""
    for position, val in _saved_values(gm, saved):
        got = strides[position] if position < len(strides) else None
        if got is None:
            continue
        recorded = [inductor_ir.sympify_int(s) for s in val.stride()]  # in inductor_ir's vocabulary
        if all(isinstance(s, sympy.Integer) for s in (*got, *recorded)):
            continue
        for size, mine, theirs in zip(val.shape, got, recorded):
            if inductor_ir.sympify_int(size) != 1 and sympy.expand(mine - theirs) != 0:
                return True
    return False


class _SavedLayouts:
    """A training forward whose compiled graph returns some saved values in its own strides (the
    backward was compiled for them): should its first call fail and the graph run eagerly instead,
    those values are copied into the compiled strides, so the backward still reads them right."""

    boxed_call: Literal[True] = True

    def __init__(self, runner: Callable[..., Any], changed: dict[int, tuple[int, ...]]) -> None:
        self.wrapped_runner = runner  # what the graph cache saves (graph_cache/runners.py)
        self._run = runner if aotgrad_is_boxed(runner) else _boxed(runner)
        self._changed: dict[int, tuple[int, ...]] | None = changed
        self._first = True

    def __call__(self, args: list[Any]) -> Any:
        outputs = self._run(args)
        changed = self._changed
        if changed is None:
            return outputs
        first, self._first = self._first, False
        if first and all(outputs[k].stride() == stride for k, stride in changed.items()):
            self._changed = None  # the compiled graph ran: nothing to copy, ever
            return outputs
        outputs = list(outputs)
        for k, stride in changed.items():
            value = outputs[k]
            if value.stride() != stride:
                copy = torch.empty_strided(value.shape, stride, dtype=value.dtype, device=value.device)
                outputs[k] = copy.copy_(value)
        return tuple(outputs)


def _boxed(fn: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def call(args: list[Any]) -> Any:
        inputs = list(args)
        args.clear()
        return fn(*inputs)

    return call


def checked_by_aotgrad(compiled: Callable[..., Any]) -> Callable[..., Any]:
    """`compiled` as a boxed runner (`_BoxedGraphRunner`) when it is an inductor_ir graph, else itself."""
    program = getattr(compiled, "program", None)
    if program is None or not callable(getattr(compiled, "call", None)):
        return compiled
    return _BoxedGraphRunner(compiled)


class DecompositionsOnDemand(Mapping[Any, Any]):
    """inductor_ir's decomposition table, built on first use: a graph loaded from the graph cache
    traces nothing, and building the table (torch's core ATen set) took 70-140 ms of a warm start.

    Ops the kernel backend runs through ATen (``eager_ops``: random ops under fallback_random) stay
    whole: a decomposition would draw its random numbers differently from eager.
    """

    def __init__(self, eager_ops: Iterable[Any] = ()) -> None:
        self._eager_ops = tuple(eager_ops)
        self._table: dict[Any, Any] | None = None

    def _built(self) -> dict[Any, Any]:
        if self._table is None:
            table = inductor_ir.decompositions()
            for op in self._eager_ops:
                table.pop(op, None)
            self._table = table
        return self._table

    def __getitem__(self, op: Any) -> Any:
        return self._built()[op]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._built())

    def __len__(self) -> int:
        return len(self._built())


def _graph_compiler(
    backends: Mapping[str, Any], context: CompileContext, artifacts: GraphArtifacts | None, which: str
) -> Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]:
    """The aotgrad fw/bw compiler: inductor_ir.compile_graph, with eager fallback and CUDA graphs."""
    inductor_config = context.config.inductor_config()  # the "inductor_ir.*" options

    def compile_aten(aten_gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable[..., Any]:
        if artifacts is not None:
            artifacts.write_graph(f"aten_{which}.py", aten_gm)
        # A training forward's saved values may come back in the compiled graph's own layouts
        # (channels-last maps); aotgrad then compiles the backward for them (see aotgrad.compile).
        saved = int(aten_gm.meta.get(SAVED_OUTPUTS_META, 0)) if which == "forward" else 0
        changed: dict[int, tuple[int, ...]] = {}

        def build() -> Callable[..., Any]:
            with context.stage("lowering", artifacts):
                compiled = inductor_ir.compile_graph(
                    aten_gm, inputs, backends=backends, config=inductor_config, free_layout_outputs=saved
                )
                if saved and _symbolic_strides_changed(aten_gm, compiled.output_stride_exprs(), saved):
                    # Other strides at symbolic sizes cannot be handed to the backward (it is compiled
                    # for fixed ones): the saved values keep the strides FX recorded.
                    compiled = inductor_ir.compile_graph(aten_gm, inputs, backends=backends, config=inductor_config)
            if saved:
                strides = compiled.output_strides()
                changed.update(_changed_strides(aten_gm, strides, saved))
                if changed:
                    aten_gm.meta[OUTPUT_STRIDES_META] = strides
            _record_split(context, compiled)
            if artifacts is not None:
                _write_compiled(artifacts, which, compiled)
            return checked_by_aotgrad(compiled)

        runner = compile_or_fall_back(build, aten_gm, context, f"the {which} graph")
        if changed:
            runner = _SavedLayouts(runner, changed)
        if context.config.cudagraphs and "cuda" in backends:
            return CudaGraphRunner(unboxed(runner), context, which)
        return runner

    return compile_aten


def inductor_backend(gm: torch.fx.GraphModule, example_inputs: list[Any], context: CompileContext) -> Callable[..., Any]:
    """Compile one captured graph to fused C++ (CPU) or Triton (CUDA) kernels."""
    artifacts = context.artifacts
    devices = graph_device_types(gm, example_inputs) or {"cpu"}
    if len(devices) > 1 and place_cpu_scalars(gm, example_inputs):
        devices = graph_device_types(gm, example_inputs)
    if len(devices) > 1:
        return fall_back(gm, context, "a graph", mixed_devices_reason(gm, example_inputs, devices))
    (device,) = devices
    if context.config.cudagraphs and device != "cuda":
        context.events.emit(
            "fallbacks", f"{context.label}: CUDA graph replay (mode='reduce-overhead') skipped: this graph is on {device}"
        )
    try:
        # Kernel sources reach the debug folder through CompiledGraph.artifacts(), so the code
        # generators get no debug folder of their own (their parse_options sets none).
        backends = {device: TimedKernelBackend(
            load_kernel_backend(device, context.config), context.stage, context.kernels, context.note_cache
        )}
    except KernelBackendUnavailable as error:
        return fall_back(gm, context, "a graph", str(error), error)
    decompositions = DecompositionsOnDemand(getattr(backends[device], "eager_ops", ()))

    compilers = {
        "fw_compiler": _graph_compiler(backends, context, artifacts, "forward"),
        "bw_compiler": _graph_compiler(backends, context, artifacts, "backward"),
    }
    # A graph compiled by an earlier process (or shipped in a bundle) is loaded, not compiled.
    cached = CachedCompile.start(gm, example_inputs, context, backends, device)
    if cached is not None:
        restored = cached.restore(gm, example_inputs, **compilers, decompositions=decompositions,
                                  config=aot_config(context))
        if restored is not None:
            return compile_or_fall_back(lambda: restored, gm, context, "a graph (loaded from the graph cache)")

    def trace() -> Callable[..., Any]:
        return aot_compile(gm, example_inputs, context, **compilers, decompositions=decompositions)

    # aotgrad's own failures fall back too (try backend="aot_eager" to see them raised).
    # The garbage collector waits while aotgrad traces and inductor_ir lowers (0.3-0.5 s of automatic
    # collections per graph); kernel compile workers forked meanwhile turn their own back on.
    with inductor_ir.collector_paused():
        compiled = compile_or_fall_back(trace, gm, context, "a graph (tracing forward/backward with aotgrad)")
    return cached.save_after_first_call(compiled) if cached is not None else compiled
