"""The driver: one region of user code ─► traced, partitioned, compiled, wrapped."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)
from torch.fx._lazy_graph_module import _use_lazy_graph_module
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.multiprocessing.reductions import StorageWeakRef

from aotgrad.config import AotConfig
from aotgrad.decompositions import (
    DecompositionSource,
    default_decompositions,
    replay_decompositions,
    with_eager_values,
)
from aotgrad.eager_upsample import UpsampleAsEager
from aotgrad.errors import (
    AotGradError,
    EagerOnlyWriteError,
    TracingError,
    UnsupportedOperatorError,
    location_from_stack_trace,
    location_from_traceback,
    unsupported_op_name,
)
from aotgrad.runtime import CompiledInference, CompiledTraining, RaisingRegion, Region
from aotgrad.runtime.absent_tangents import AbsentTangentBackwards
from aotgrad.runtime.boxed import boxed_graph_module
from aotgrad.runtime.higher_order import DifferentiableBackward
from aotgrad.runtime.writeback import MUTATED_INPUTS_META
from aotgrad.tracing import FunctionalGraph, JointGraph, trace_functional, trace_joint
from aotgrad.tracing.functional import trace_with_writes
from aotgrad.tracing.graph_passes import (
    eliminate_dead_code,
    merge_common_subexpressions,
    output_values,
    placeholders,
)
from aotgrad.tracing.overlap import OverlappingWriteError, distinct_elements, repeated_dims

log = logging.getLogger("aotgrad")

EAGER_RUN = "aotgrad_eager_run"
"""The attribute (True) of an ``aotgrad`` log record saying a graph runs eagerly: a caller with its
own fallback reporting (the frontend) turns such records into its events."""

CompilerFn = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]
"""A forward or backward compiler: a functional ATen graph and its example inputs (tensors and
symbolic sizes) in, a callable running it out (plain, or a `BoxedCallable`). The same shape as a
capture backend, so one can be handed to the other."""
Partitioner = Callable[[JointGraph], tuple[torch.fx.GraphModule, torch.fx.GraphModule]]


@dataclasses.dataclass(frozen=True)
class Compilers:
    """The forward and backward compilers, each `(aten_gm, fake_example_inputs) -> callable`."""

    forward: CompilerFn
    backward: CompilerFn


@dataclasses.dataclass
class TracedRegion:
    """What tracing produced for one region: the forward, and for training the joint graph."""

    forward: FunctionalGraph
    joint: JointGraph | None
    distinct_inputs: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # Those inputs' full shapes (symbolic where the inputs' sizes are), and the fake inputs traced
    # (the distinct elements): a double backward's replay graph expands them back (`_full_shapes`).
    full_shapes: dict[int, torch.Size] = dataclasses.field(default_factory=dict)
    traced_inputs: Sequence[Any] = ()


def fake_inputs_for(flat_inputs: Sequence[Any], unbacked: bool = False) -> tuple[FakeTensorMode, list[Any]]:
    """A fake mode and fake copies of the tensors among `flat_inputs` (real or already fake).

    With `unbacked`, a new mode gets a ShapeEnv that lets data-dependent ops trace: `nonzero`'s
    output size and `item()`'s value become unbacked symbols (``u0``) of the graph.
    """
    for value in flat_inputs:
        if isinstance(value, FakeTensor):
            # Real tensors beside fake ones (a module's parameters next to symbolic-size inputs)
            # join the same mode, with static shapes.
            mode = value.fake_mode
            return mode, [
                mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) and not isinstance(x, FakeTensor) else x
                for x in flat_inputs
            ]
    # Tensors a function closes over (not inputs) are constants of the graph: allow them.
    shape_env = ShapeEnv(allow_scalar_outputs=True, allow_dynamic_output_shape_ops=True) if unbacked else None
    mode = FakeTensorMode(allow_non_fake_inputs=True, shape_env=shape_env)
    return mode, [mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x for x in flat_inputs]


def _check_constants(gm: torch.fx.GraphModule, training: bool) -> None:
    """Refuse tensors closed over (graph constants) that require grad: their gradient would be lost."""
    for node in gm.graph.nodes:
        if node.op != "get_attr":
            continue
        value = getattr(gm, str(node.target), None)
        if training and isinstance(value, torch.Tensor) and value.requires_grad:
            raise TracingError(
                f"the function uses a tensor that requires grad but is not an input (shape "
                f"{tuple(value.shape)}, e.g. a parameter captured from a closure); aotgrad would not compute its "
                "gradient. Pass it as an argument, or compile the module with aot_module / aot_graph.",
                None,
            )


@contextlib.contextmanager
def _onednn_disabled() -> Iterator[None]:
    enabled = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(enabled)


def _python_dispatcher_if_symbolic(fakes: Sequence[Any]) -> contextlib.AbstractContextManager[Any]:
    """The Python dispatcher while tracing inputs with symbolic sizes (a no-op context otherwise).

    Some composite ATen kernels (`constant_pad_nd`, `narrow` -> `slice`) take concrete sizes or
    read a storage offset in C++; with symbolic sizes they fail ("SymIntArrayRef expected to
    contain only concrete integers", "Cannot call storage_offset() on tensor with symbolic
    sizes/strides"). The Python dispatcher routes them to their symbolic-aware Python kernels.
    """
    from torch._dispatch.python import enable_python_dispatcher

    def symbolic(value: Any) -> bool:
        return isinstance(value, torch.Tensor) and any(
            not isinstance(d, int) for d in (*value.shape, *value.stride(), value.storage_offset()))

    if not any(symbolic(x) for x in fakes):
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    stack.enter_context(enable_python_dispatcher())
    stack.enter_context(UpsampleAsEager())  # the dispatcher would run torch's own upsampling first
    return stack


def trace_region(
    fn: Callable[..., Any],
    flat_inputs: Sequence[Any],
    grad_mask: Sequence[bool] | None,
    decompositions: DecompositionSource,
) -> TracedRegion:
    """Trace `fn` to its functional forward and, when `grad_mask` is given, its joint graph.

    Inputs without symbolic sizes are traced in a fake mode without a ShapeEnv; when an op's output
    depends on the data (`nonzero`, `masked_select`, `item()`), the region is traced again with one,
    so those outputs' sizes and values are unbacked symbols.
    """
    try:
        return _trace_region(fn, flat_inputs, grad_mask, decompositions, unbacked=False)
    except Exception as error:
        # The inputs' own ShapeEnv decides for fake inputs (capture's, see its config).
        if not _data_dependent(error) or any(isinstance(x, FakeTensor) for x in flat_inputs):
            raise
        log.debug("aotgrad: tracing again with unbacked symbols (%s)", error)
    return _trace_region(fn, flat_inputs, grad_mask, decompositions, unbacked=True)


def _data_dependent(error: BaseException) -> bool:
    """Whether a fake tensor refused an op for depending on the data (anywhere in the cause chain)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (DynamicOutputShapeException, DataDependentOutputException)):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _trace_region(
    fn: Callable[..., Any],
    flat_inputs: Sequence[Any],
    grad_mask: Sequence[bool] | None,
    decompositions: DecompositionSource,
    unbacked: bool,
) -> TracedRegion:
    fake_mode, fakes = fake_inputs_for(flat_inputs, unbacked)
    # With oneDNN off, decompositions pick portable ATen ops over oneDNN kernels whose workspace
    # outputs fake tensors cannot describe (the recurrent layers); the graph's ops still use oneDNN.
    with fake_mode, _onednn_disabled(), _python_dispatcher_if_symbolic(fakes):
        full_shapes = {i: fakes[i].shape for i, _ in _distinct_dims(fakes, grad_mask)}
        fn, fakes, distinct = _through_distinct_elements(fn, fakes, grad_mask)
        traced = fakes if grad_mask is None else _writable_in_place(fakes)
        forward = trace_functional(fn, traced, decompositions, training=grad_mask is not None)
        _check_constants(forward.gm, training=torch.is_grad_enabled())
        _refuse_writes_into_shared_memory(flat_inputs, forward.mutated_inputs)
        if grad_mask is None:  # never differentiated: repeated calls can be merged
            if merge_common_subexpressions(forward.gm.graph, distinct_outputs=len(output_values(forward.gm.graph))):
                eliminate_dead_code(forward.gm.graph)
                forward.gm.recompile()
            return TracedRegion(forward, None, distinct, full_shapes, fakes)
        # The trace ran the user's in-place ops under autograd: an input that requires grad now
        # (it did before, or it was written from values that do) has a differentiable new value,
        # written back with grad mode on, so autograd records the write as eager's in-place op does.
        # An input written only where autograd does not see it (under no_grad, through `.data`)
        # keeps its history, as in eager: written back under no_grad.
        forward.differentiable_mutations = tuple(
            i for i in forward.mutated_inputs if traced[i].requires_grad and i not in forward.hidden_mutations
        )
        # The forward's ATen ops carry autocast's casts already; traced again under the caller's
        # autocast they would be cast a second time (a matmul in a `torch.autocast(enabled=False)`
        # block would run in bfloat16).
        with torch._C._DisableAutocast():
            joint = trace_joint(forward, fakes, grad_mask, decompositions)
        return TracedRegion(forward, joint, distinct, full_shapes, fakes)


def _refuse_writes_into_shared_memory(inputs: Sequence[Any], mutated: Sequence[int]) -> None:
    """Raise `TracingError` where an input the region writes in place shares memory with another
    input (two views of one tensor): the functional graph gives each input its own values, so the
    other would not see the write (eager's does). The region then runs eagerly. (Capture keeps such
    calls from compiled graphs with a guard; this covers `aot_function` and `aot_module` too, for
    the example inputs.)"""
    if not mutated:
        return
    by_storage = _inputs_by_storage(inputs)
    for index in mutated:
        value = inputs[index]
        if not isinstance(value, torch.Tensor):
            continue
        sharing = by_storage[StorageWeakRef(value.untyped_storage())]
        others = [i for i in sharing if i != index and _overlap(value, inputs[i])]
        if others:
            raise TracingError(
                f"input {index} is written in place and shares memory with input {others[0]}; a compiled graph "
                "would not show the write through the other input (pass separate tensors, e.g. `.clone()`)",
                None,
            )


def _inputs_by_storage(inputs: Sequence[Any]) -> dict[Any, list[int]]:
    """The tensor inputs' indices by the memory they use: only inputs sharing memory with another need
    `_overlap` (a model's parameters each have their own; comparing every pair would grow with their
    square)."""
    by_storage: dict[Any, list[int]] = {}
    for index, value in enumerate(inputs):
        if isinstance(value, torch.Tensor):
            by_storage.setdefault(StorageWeakRef(value.untyped_storage()), []).append(index)
    return by_storage


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether `a` and `b` may share an element: the same memory and intersecting spans of it (disjoint
    slices of one buffer, such as parameters flattened into one, do not overlap)."""
    if StorageWeakRef(a.untyped_storage()) != StorageWeakRef(b.untyped_storage()):
        return False
    spans = []
    for t in (a, b):
        if not all(isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset())):
            return True  # symbolic: assume they may
        if t.numel() == 0:
            return False
        start = t.storage_offset() * t.element_size()
        extent = 1 + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride()))
        spans.append((start, start + extent * t.element_size()))
    (a_start, a_end), (b_start, b_end) = spans
    return a_start < b_end and b_start < a_end


def _writable_in_place(fakes: Sequence[Any]) -> list[Any]:
    """`fakes` with each input that requires grad replaced by a non-leaf copy of equal strides.

    The real input a region updates in place is not a leaf (eager refuses in-place ops on leaves that
    require grad): an activation from earlier code, e.g. ``out += identity`` after a graph break. The
    trace runs the user's ops under autograd, which would refuse the same update on a leaf. An input
    whose elements share memory (expanded) stays as it is: eager cannot write into it either; so does
    an input sharing memory with another input (two views of one activation): a copy would hide the
    write from the other, and the trace would read stale values (it refuses the write instead).
    """
    writable = list(fakes)
    by_storage = _inputs_by_storage(fakes)
    with torch.enable_grad():
        for index, fake in enumerate(fakes):
            if not (isinstance(fake, torch.Tensor) and fake.requires_grad and fake.is_leaf):
                continue
            sharing = by_storage[StorageWeakRef(fake.untyped_storage())]
            if not any(i != index and _overlap(fake, fakes[i]) for i in sharing):
                copy = torch.empty_strided(fake.shape, fake.stride(), dtype=fake.dtype, device=fake.device)
                try:
                    writable[index] = copy.copy_(fake)
                except RuntimeError:  # elements that share memory: nothing can be written into them
                    pass
    return writable


def _distinct_dims(
    fakes: Sequence[Any], grad_mask: Sequence[bool] | None
) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(input, dims) for the inputs whose elements repeat along `dims` and that need no grad."""
    return tuple(
        (i, tuple(dims))
        for i, x in enumerate(fakes)
        if isinstance(x, torch.Tensor) and not (grad_mask and grad_mask[i]) and (dims := repeated_dims(x))
    )


def _through_distinct_elements(
    fn: Callable[..., Any], fakes: list[Any], grad_mask: Sequence[bool] | None
) -> tuple[Callable[..., Any], list[Any], tuple[tuple[int, tuple[int, ...]], ...]]:
    """`fn` over the distinct elements of inputs whose elements repeat (an expanded tensor passed
    in, that needs no grad), expanded back inside the graph.

    Traced as inputs of their full size, such inputs would be taken for independent elements: a
    write into one element (`x.narrow(0, 0, 1).exp_()`) would not show in its copies, and the new
    value could not be written back into the input. Expanded inside the graph, functionalization
    sees the sharing. Returns the function, its example inputs, and (input, dims) pairs for `Region`.
    """
    distinct = _distinct_dims(fakes, grad_mask)
    if not distinct:
        return fn, fakes, ()
    shapes = {i: fakes[i].shape for i, _ in distinct}
    fakes = list(fakes)
    for i, repeated in distinct:
        fakes[i] = distinct_elements(fakes[i], repeated)

    def expanded(*flat: Any) -> Any:
        return fn(*(x.expand(shapes[i]) if i in shapes else x for i, x in enumerate(flat)))

    return expanded, fakes, distinct


def _example_inputs(gm: torch.fx.GraphModule) -> list[Any]:
    return [node.meta.get("val") for node in placeholders(gm.graph)]


def _explain_failure(error: BaseException, node: torch.fx.Node | None) -> AotGradError:
    location = location_from_stack_trace(node.meta.get("stack_trace")) if node is not None else None
    location = location or location_from_traceback(error.__traceback__)
    if node is not None and location is None:
        location = f"graph node `{node.name}` ({node.format_node()})"
    op = unsupported_op_name(error)
    if op is not None:
        return UnsupportedOperatorError(op, location, f"{type(error).__name__}: {error}")
    if isinstance(error, TracingError):
        return TracingError(error.reason, error.user_location or location)
    return TracingError(f"{type(error).__name__}: {error}", location)


# A training forward graph's meta: how many of its last outputs are values saved for the backward
# graph. Its compiler may return those in strides of its own choosing (channels-last feature maps)
# if it writes every output's strides (a tuple of ints, or None where unknown) under
# OUTPUT_STRIDES_META in the graph's meta: the backward graph is then compiled for them.
SAVED_OUTPUTS_META = "aotgrad_saved_outputs"
OUTPUT_STRIDES_META = "aotgrad_output_strides"


def _restride_saved(forward_gm: torch.fx.GraphModule, backward_gm: torch.fx.GraphModule, saved: int) -> None:
    """Give the backward's saved-value placeholders the strides the compiled forward returns them with."""
    strides = forward_gm.meta.get(OUTPUT_STRIDES_META)
    if strides and 0 < saved <= len(strides):
        restride_to(backward_gm, strides[len(strides) - saved :])


def restride_to(backward_gm: torch.fx.GraphModule, strides: Sequence[Sequence[int] | None]) -> None:
    """Give the backward's first placeholders (saved values) `strides` (None: as they are), where
    their sizes and strides are static and their strides differ."""
    for node, stride in zip(placeholders(backward_gm.graph), strides):
        val = node.meta.get("val")
        if stride is None or not isinstance(val, FakeTensor) or len(stride) != val.dim():
            continue
        # Symbolic sizes or strides are left alone (comparing them with ints would add guards).
        if not all(isinstance(n, int) for n in (*val.shape, *val.stride())) or tuple(val.stride()) == tuple(stride):
            continue
        with val.fake_mode:
            node.meta["val"] = torch.empty_strided(val.shape, stride, dtype=val.dtype, device=val.device)
        node.meta.pop("tensor_meta", None)


def compile_backward(compiler: CompilerFn, backward_gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """`backward_gm` compiled by `compiler` (run as it is where it takes no inputs)."""
    # No output needs a gradient (and nothing is saved): the backward only returns Nones; a code
    # generator need not see a graph without inputs.
    if not placeholders(backward_gm.graph):
        return boxed_graph_module(backward_gm)
    return compiler(backward_gm, _example_inputs(backward_gm))


def compile_region(
    fn: Callable[..., Any],
    flat_inputs: Sequence[Any],
    grad_mask: Sequence[bool] | None,
    *,
    compilers: Compilers,
    partition: Partitioner,
    decompositions: DecompositionSource | None,
    config: AotConfig,
    current_node: Callable[[], torch.fx.Node | None] | None = None,
) -> Region | RaisingRegion | None:
    """Trace, partition and compile one region; None means "run it eagerly" (reason logged).

    Args:
        fn: the computation over flat inputs (module state first, then the user's inputs).
        flat_inputs: example values for them.
        grad_mask: per input whether its gradient is wanted; None for the inference path.
        compilers: the forward and backward compilers.
        partition: the partitioner for the joint graph.
        decompositions: the ATen decomposition table (None: the default).
        config: options; `config.fallback_to_eager` decides between logging and raising.
        current_node: tells which FX node was running when tracing failed, for the error.
    """
    table = default_decompositions() if decompositions is None else with_eager_values(decompositions)
    try:
        # Graph modules made while tracing and partitioning write their Python code only when it is
        # used (called, or `.code` read): a code generator reads graphs, and most are never run.
        with _use_lazy_graph_module(True):
            # 1. trace: functional forward, and the joint forward+backward when training
            traced = trace_region(fn, flat_inputs, grad_mask, table)
            # 2. partition the joint graph into forward and backward
            with torch._C._DisableAutocast():
                split = partition(traced.joint) if traced.joint is not None else None
    except OverlappingWriteError as error:
        # Eager raises here on every call with inputs like these: so does the region.
        node = current_node() if current_node else None
        location = error.user_location or (location_from_stack_trace(node.meta.get("stack_trace")) if node else None)
        return RaisingRegion(error.op, location)
    except EagerOnlyWriteError as error:
        # The program is valid and only eager can make this write: run eagerly, fallback or not.
        failure = _explain_failure(error, current_node() if current_node else None)
        log.warning("aotgrad: running this graph eagerly (whatever fallback_to_eager says): %s", failure,
                    extra={EAGER_RUN: True})
        return None
    except Exception as error:
        failure = _explain_failure(error, current_node() if current_node else None)
        if not config.fallback_to_eager:
            raise failure from error
        log.warning("aotgrad: running this graph eagerly: %s", failure, extra={EAGER_RUN: True})
        return None
    # The replay graph of a double backward is traced later, outside the caller's autocast.
    writes_replayable = not torch._C._is_any_autocast_enabled()
    # 3. compile each side and wrap them for eager autograd (autocast is applied in the graphs
    # already: code generators that trace or run them again must not apply it twice)
    with torch._C._DisableAutocast():
        return _compiled_region(traced, split, compilers, _replay_tracer(fn, traced, writes_replayable))


def _replay_tracer(
    fn: Callable[..., Any], traced: TracedRegion, writes_replayable: bool
) -> Callable[[Sequence[Any]], torch.fx.GraphModule | None]:
    """For a double backward through `traced`'s region: traces `fn` from the region's inputs into the
    forward graph its replay runs (`DifferentiableBackward.eager_replay`), or None where the region's
    own graph is replayed.

    A forward that writes into views (`tracing/view_writes.py`) gets a graph keeping its in-place
    ops (`trace_with_writes`; not where the region was traced under autocast, whose casts a later
    trace would miss); else one with batch norm whole (`replay_decompositions`), or None where that
    graph would not line up with the compiled forward's outputs (then the region replays its own
    graph, whose gradients are eager's values, but the weight's may lack the history eager's has:
    logged). Both keep batch norm whole.

    The region's inputs are those it runs on: an input whose elements repeat (an expanded tensor)
    comes narrowed to its distinct elements, and is expanded back to its full shape for `fn`."""
    forward = traced.forward

    def trace(inputs: Sequence[Any]) -> torch.fx.GraphModule | None:
        full = _full_shapes(traced, inputs)
        if full is None:
            _log_decomposed_replay("an expanded input's size is bound to no input")
            return None

        def whole_fn(*flat: Any) -> Any:
            return fn(*(x.expand(full[i]) if i in full else x for i, x in enumerate(flat)))

        if forward.writes_into_views and writes_replayable:
            with_writes = _trace_keeping_writes(whole_fn, inputs, forward)
            if with_writes is not None or not forward.decomposed_batch_norm:
                return with_writes
        try:
            whole = _trace_whole(whole_fn, inputs)
        except Exception as error:  # the region's own graph still replays: its gradients are eager's values
            _log_decomposed_replay(f"{type(error).__name__}: {error}")
            return None
        same_outputs = whole.num_graph_outputs == forward.num_graph_outputs
        if whole.mutated_inputs != forward.mutated_inputs or not same_outputs:
            _log_decomposed_replay("its graph with batch norm whole has other outputs")
            return None
        return whole.gm

    return trace


def _log_decomposed_replay(why: str) -> None:
    log.warning(
        "aotgrad: a double backward replays the region's own graph (%s): its gradients are eager's values, "
        "but may lack the history eager's have (a batch norm's weight's, or an op's decomposed at symbolic sizes)",
        why,
    )


def _trace_keeping_writes(
    fn: Callable[..., Any], inputs: Sequence[Any], forward: FunctionalGraph
) -> torch.fx.GraphModule | None:
    """`trace_with_writes` from the region's real inputs (again with unbacked symbols where an op's
    output depends on the data); None where it cannot be traced (the region's own graph replays)."""
    for unbacked in (False, True):
        fake_mode, fakes = fake_inputs_for(list(inputs), unbacked)
        try:
            with fake_mode, _onednn_disabled(), torch._C._DisableAutocast():
                return trace_with_writes(fn, fakes, forward, replay_decompositions())
        except Exception as error:
            if unbacked or not _data_dependent(error):
                log.debug("aotgrad: a double backward replays the functional graph (%s: %s)", type(error).__name__, error)
                return None
    return None


def _trace_whole(fn: Callable[..., Any], inputs: Sequence[Any]) -> FunctionalGraph:
    """`fn`'s forward graph with batch norm whole, traced from `inputs` (again with unbacked
    symbols where an op's output depends on the data, as in `trace_region`)."""
    try:
        return _trace_whole_once(fn, inputs, unbacked=False)
    except Exception as error:
        if not _data_dependent(error):
            raise
    return _trace_whole_once(fn, inputs, unbacked=True)


def _trace_whole_once(fn: Callable[..., Any], inputs: Sequence[Any], unbacked: bool) -> FunctionalGraph:
    fake_mode, fakes = fake_inputs_for(list(inputs), unbacked)
    with fake_mode, _onednn_disabled(), torch._C._DisableAutocast():
        return trace_functional(fn, fakes, {}, training=True, early=replay_decompositions())


def _full_shapes(traced: TracedRegion, inputs: Sequence[Any]) -> dict[int, tuple[int, ...]] | None:
    """The full shapes of the region's inputs narrowed to their distinct elements, given the real
    inputs of one call: symbolic sizes bound through the sizes (and ints) the traced inputs had
    for them. None where a size is bound to nothing the region takes."""
    bindings: dict[Any, int] = {}
    for fake, real in zip(traced.traced_inputs, inputs):
        tensors = isinstance(fake, torch.Tensor) and isinstance(real, torch.Tensor)
        pairs = zip(fake.shape, real.shape) if tensors else [(fake, real)]
        for size, value in pairs:
            if isinstance(size, torch.SymInt) and isinstance(value, int) and size.node.expr.is_symbol:
                bindings[size.node.expr] = value
    full: dict[int, tuple[int, ...]] = {}
    for index, shape in traced.full_shapes.items():
        sizes = []
        for size in shape:
            if isinstance(size, torch.SymInt):
                expr = size.node.expr.xreplace(bindings)
                if not expr.is_number:
                    return None
                size = int(expr)
            sizes.append(int(size))
        full[index] = tuple(sizes)
    return full


def _compiled_region(
    traced: TracedRegion,
    split: tuple[torch.fx.GraphModule, torch.fx.GraphModule] | None,
    compilers: Compilers,
    batch_norm_whole: Callable[[Sequence[Any]], torch.fx.GraphModule | None] | None = None,
) -> Region:
    forward_gm = split[0] if split is not None else traced.forward.gm
    forward_gm.meta[MUTATED_INPUTS_META] = traced.forward.mutated_inputs  # see runtime/writeback.py
    if split is None:
        gm = traced.forward.gm
        return Region(traced.forward, CompiledInference(compilers.forward(gm, _example_inputs(gm))), traced.distinct_inputs)
    assert traced.joint is not None
    forward_gm, backward_gm = split
    saved = len(placeholders(backward_gm.graph)) - traced.joint.num_tangents
    if log.isEnabledFor(logging.DEBUG):
        log.debug(
            "aotgrad: joint graph of %d nodes split into forward (%d nodes) and backward (%d nodes), %d saved values",
            len(traced.joint.gm.graph.nodes), len(forward_gm.graph.nodes), len(backward_gm.graph.nodes), saved,
        )
    forward_gm.meta[SAVED_OUTPUTS_META] = saved  # and the compiler may report their strides
    forward = compilers.forward(forward_gm, _example_inputs(forward_gm))
    _restride_saved(forward_gm, backward_gm, saved)
    # Kept: calls where some outputs get no gradient derive their backward from it (runtime/absent_tangents.py).
    compile_bw = functools.partial(compile_backward, compilers.backward)
    absent_tangents = AbsentTangentBackwards(backward_gm, saved, compile_bw, len(traced.joint.grad_inputs))
    return Region(
        traced.forward,
        CompiledTraining(
            forward=forward,
            backward=compile_bw(backward_gm),
            num_fwd_outputs=traced.joint.num_fwd_outputs,
            differentiable_outputs=traced.joint.differentiable_outputs,
            grad_inputs=traced.joint.grad_inputs,
            mutated_inputs=traced.forward.mutated_inputs,
            raising_outputs=traced.joint.raising_outputs,
            absent_tangents=absent_tangents,
            higher_order=DifferentiableBackward.for_region(
                traced.forward, traced.joint.grad_inputs, traced.joint.differentiable_outputs, batch_norm_whole
            ),
        ),
        traced.distinct_inputs,
    )
