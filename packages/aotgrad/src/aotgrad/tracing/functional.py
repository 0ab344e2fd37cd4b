"""Stage 1: any callable over flat tensors ─► one functional ATen graph of its forward.

The result computes `(*new values of mutated inputs, *graph outputs)` with no in-place op and no
input mutation left; `OutputSpec`s say how the runtime wrapper rebuilds each user output, so that
outputs aliasing an input or each other keep eager's aliasing (a returned view is a view).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import operator
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from aotgrad.decompositions import (
    BATCH_NORMS,
    DecompositionSource,
    DecompositionTable,
    mutation_decompositions,
)
from aotgrad.eager_recurrent import RecurrentInFloat32
from aotgrad.errors import EagerOnlyWriteError, TracingError, location_from_stack_trace
from aotgrad.tracing.eager_checks import EagerChecks
from aotgrad.tracing.graph_passes import (
    clean,
    draw_random_in_memory_order,
    output_node,
    output_values,
    placeholders,
    truncate_integral_addcmul_values,
    views_as_reshapes,
)
from aotgrad.tracing.hidden_writes import BarrierSwitch, HiddenWrites
from aotgrad.tracing.overlap import OverlapChecks, OverlapWatch, provably_distinct
from aotgrad.tracing.runtime_asserts import fresh_unbacked_symbols, materialize_runtime_asserts
from aotgrad.tracing.single_pass import (
    BatchNormAboveFunctionalization,
    SinglePassUnsupported,
    check_input_metadata_kept,
    check_one_pass_graph,
    input_metadata,
    traceable_in_one_pass,
)
from aotgrad.tracing.view_writes import WritesIntoViews

aten = torch.ops.aten
log = logging.getLogger("aotgrad")

# In-place ops that change an input's shape or strides rather than its data: not supported.
_METADATA_MUTATIONS = frozenset(
    {"t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "resize_", "resize_as_", "set_",
     "swapdims_", "swapaxes_", "detach_"}
)


@dataclasses.dataclass(frozen=True)
class ViewStep:
    """One view op to replay on a real tensor: `op(tensor, *args, **kwargs)`, then `[index]` for
    ops returning several views (`unbind`, `split`)."""

    op: torch._ops.OpOverload
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    index: int | None = None

    def apply(self, tensor: torch.Tensor) -> torch.Tensor:
        """Replay this view on `tensor`."""
        result = self.op(tensor, *self.args, **self.kwargs)
        view: torch.Tensor = result if self.index is None else result[self.index]
        return view


@dataclasses.dataclass(frozen=True)
class OutputSpec:
    """How the runtime wrapper produces one flat user output.

    kind:
        ``"graph"``: graph output `index`, then `views` replayed on it (several user outputs may
        share one graph output: they alias each other, as in eager);
        ``"input"``: flat input `index` (after mutations are applied), then `views`: the output is
        a real view of the real input;
        ``"constant"``: `constant`, a non-tensor value.
    """

    kind: Literal["graph", "input", "constant"]
    index: int = -1
    views: tuple[ViewStep, ...] = ()
    constant: Any = None

    def build(self, inputs: Sequence[Any], graph_outputs: Sequence[Any]) -> Any:
        """The user output from the real inputs and the graph's outputs."""
        if self.kind == "constant":
            return self.constant
        value = inputs[self.index] if self.kind == "input" else graph_outputs[self.index]
        for step in self.views:
            value = step.apply(value)
        return value


@dataclasses.dataclass
class FunctionalGraph:
    """A functional ATen forward graph and what the wrapper needs to honour eager semantics.

    Attributes:
        gm: `(*flat inputs) -> (*new values of mutated inputs, *graph outputs)`.
        mutated_inputs: flat input indices whose data the function mutates, in output order.
        num_graph_outputs: outputs after the mutated-input values.
        outputs: one `OutputSpec` per flat user output.
        out_spec: the pytree structure of the user's output.
        differentiable_mutations: mutated inputs that need no grad but whose new value does, as
            eager's autograd sees them (`x[0].add_(w)` with `w` requiring grad): the joint graph
            differentiates their new values and the wrapper writes them back under grad mode.
        decomposed_batch_norm: a batch norm was decomposed before autograd (the early table): a
            double backward replays a graph traced again with it whole (`replay_decompositions`).
        writes_into_views: the function writes in place into a view (`tracing/view_writes.py`): a
            double backward replays a graph that keeps its in-place ops (`trace_with_writes`).
        hidden_mutations: mutated inputs written only by writes eager's autograd does not record
            (under no_grad, through `.data` or `.detach()`: `tracing/hidden_writes.py`): written back
            under no_grad, they keep their history (a leaf stays a leaf).
    """

    gm: torch.fx.GraphModule
    mutated_inputs: tuple[int, ...]
    num_graph_outputs: int
    outputs: tuple[OutputSpec, ...]
    out_spec: pytree.TreeSpec
    differentiable_mutations: tuple[int, ...] = ()
    decomposed_batch_norm: bool = False
    writes_into_views: bool = False
    hidden_mutations: tuple[int, ...] = ()


def _check_no_metadata_mutation(gm: torch.fx.GraphModule) -> None:
    inputs = set(placeholders(gm.graph))
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        name = target._schema.name.split("::")[-1]
        if name in _METADATA_MUTATIONS and node.args and node.args[0] in inputs:
            raise TracingError(
                f"`{name}` changes the shape or strides of an input in place; aotgrad only supports "
                "in-place changes of an input's data. Use the out-of-place op (e.g. `x = x.t()`).",
                None,
            )


def _replayable_view(node: Any) -> bool:
    return (
        isinstance(node, torch.fx.Node)
        and node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target.is_view
        and bool(node.args)
        and isinstance(node.args[0], torch.fx.Node)
        and not any(isinstance(a, torch.fx.Node) for a in pytree.tree_leaves((node.args[1:], node.kwargs)))
    )


def _view_chain(node: Any) -> tuple[Any, tuple[ViewStep, ...]]:
    """Walk back through view ops whose other arguments are constants: (root, steps root→node)."""
    steps: list[ViewStep] = []
    while True:
        index = None
        view = node
        if isinstance(node, torch.fx.Node) and node.target is operator.getitem and isinstance(node.args[1], int):
            index, view = node.args[1], node.args[0]
        if not _replayable_view(view):
            break
        steps.append(ViewStep(view.target, tuple(view.args[1:]), dict(view.kwargs), index))
        node = view.args[0]
    return node, tuple(reversed(steps))


def _rewrite_outputs(gm: torch.fx.GraphModule, flat_outputs_spec: pytree.TreeSpec) -> FunctionalGraph:
    graph = gm.graph
    inputs = placeholders(graph)
    input_index = {node: i for i, node in enumerate(inputs)}
    # Input mutations: functionalization ends the graph with `copy_(input, new_value)`.
    new_value_of: dict[int, torch.fx.Node] = {}
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default and node.args[0] in input_index:
            new_value_of[input_index[node.args[0]]] = node.args[1]
            graph.erase_node(node)
    for index in new_value_of:
        value = inputs[index].meta.get("val")
        if isinstance(value, torch.Tensor) and not provably_distinct(value):
            # Its elements share memory (`as_strided((3, 2), (1, 1))`): the new value, written back element
            # by element, would leave each shared location holding whichever copy came last.
            raise EagerOnlyWriteError(
                f"an input (flat input {index}) whose elements overlap in memory is written in place; eager "
                "updates it element by element, which aotgrad cannot express, so this graph runs eagerly. "
                "To compile it, write into a `clone()`.",
                None,
            )
    for node in graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            if torch.Tag.nondeterministic_seeded not in target.tags:
                raise TracingError(f"in-place op `{target}` survived functionalization", None)
    mutated_value_index = {value: i for i, value in new_value_of.items()}

    out_node = output_node(graph)
    user_outputs = output_values(graph)
    roots = [_view_chain(out) for out in user_outputs]
    sharing: dict[torch.fx.Node, int] = {}
    for root, _ in roots:
        if isinstance(root, torch.fx.Node):
            sharing[root] = sharing.get(root, 0) + 1

    graph_outputs: list[torch.fx.Node] = []
    position: dict[torch.fx.Node, int] = {}

    def graph_output(node: torch.fx.Node) -> int:
        if node not in position:
            position[node] = len(graph_outputs)
            graph_outputs.append(node)
        return position[node]

    specs: list[OutputSpec] = []
    for out, (root, steps) in zip(user_outputs, roots):
        if not isinstance(out, torch.fx.Node):
            specs.append(OutputSpec("constant", constant=out))
        elif root in input_index:
            specs.append(OutputSpec("input", input_index[root], steps))
        elif root in mutated_value_index:
            specs.append(OutputSpec("input", mutated_value_index[root], steps))
        elif sharing.get(root, 0) > 1:
            specs.append(OutputSpec("graph", graph_output(root), steps))
        else:
            specs.append(OutputSpec("graph", graph_output(out)))

    mutated = tuple(sorted(new_value_of))
    out_node.args = ((*[new_value_of[i] for i in mutated], *graph_outputs),)
    clean(gm)
    return FunctionalGraph(gm, mutated, len(graph_outputs), tuple(specs), flat_outputs_spec)


class _GradientBarriers(TorchDispatchMode):
    """Detaches the results of ops the user runs with grad mode off (`torch.no_grad()` blocks).

    The forward is traced below autograd, so grad mode is not in the graph; an explicit
    `aten.detach` keeps the backward from flowing where eager's would not. `barrier.passing` lifts
    them (for the straight-through writes of `tracing/hidden_writes.py`).
    """

    def __init__(self, barrier: BarrierSwitch) -> None:
        super().__init__()
        self._barrier = barrier

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if torch.is_grad_enabled() or func in _DETACH or self._barrier.passing:
            return out
        return pytree.tree_map_only(torch.Tensor, aten.detach.default, out)


_DETACH = frozenset({aten.detach.default})


def _check_no_custom_backward(outputs: Sequence[Any]) -> None:
    """Refuse user-defined `torch.autograd.Function`s: tracing records their forward's ops, and
    differentiating those instead of calling their own backward could give a different gradient."""
    seen: set[Any] = set()
    stack: list[Any] = [out.grad_fn for out in outputs if isinstance(out, torch.Tensor) and out.grad_fn is not None]
    while stack:
        grad_fn = stack.pop()
        if grad_fn is None or grad_fn in seen:
            continue
        seen.add(grad_fn)
        if isinstance(grad_fn, torch.autograd.function.BackwardCFunction):
            name = type(grad_fn).__name__.removesuffix("Backward")
            raise TracingError(
                f"the graph calls the custom autograd.Function `{name}`; aotgrad would differentiate "
                "its forward instead of running its backward. Keep it out of the compiled region.",
                None,
            )
        stack.extend(next_fn for next_fn, _ in grad_fn.next_functions)


def _drop_detaches(gm: torch.fx.GraphModule) -> None:
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _DETACH:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)


def _lift_tensor_constants(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """Turn `gm`'s tensor constants into trailing inputs and return their values.

    Functionalization only sees through tensors passed to it: an in-place op on a tensor made from a
    constant (`zeros_like(mask).masked_fill_(mask, -inf)`, as attention does with a closed-over
    mask) would otherwise stay in place. Passed as inputs, the constants are traced as constants.
    `gm`'s code is left stale: it is only interpreted.
    """
    graph = gm.graph
    last_input = placeholders(graph)[-1] if placeholders(graph) else None
    values: list[torch.Tensor] = []
    lifted: dict[str, torch.fx.Node] = {}
    for node in list(graph.nodes):
        if node.op != "get_attr":
            continue
        value = getattr(gm, str(node.target), None)
        if not isinstance(value, torch.Tensor):
            continue
        if node.target not in lifted:
            where = graph.inserting_after(last_input) if last_input is not None else graph.inserting_before()
            with where:
                lifted[str(node.target)] = last_input = graph.placeholder(f"constant_{len(values)}")
            values.append(value)
        node.replace_all_uses_with(lifted[str(node.target)])
        graph.erase_node(node)
    return values


def trace_functional(
    fn: Callable[..., Any],
    fake_inputs: Sequence[Any],
    decompositions: DecompositionSource,
    *,
    training: bool = False,
    early: DecompositionTable | None = None,
) -> FunctionalGraph:
    """Trace `fn(*fake_inputs)` into a `FunctionalGraph` of decomposed, functional ATen ops.

    Args:
        fn: any callable over the flat inputs; its result may be any pytree of tensors and constants.
        fake_inputs: fake tensors (and constants), made under the fake mode that is active while
            this runs.
        decompositions: the table make_fx applies (see `aotgrad.decompositions`); when training it is
            applied later, by `trace_joint`.
        training: the graph will be differentiated (`trace_joint`): keep `aten.detach` and the
            user's `torch.no_grad()` blocks as explicit gradient barriers, and do not decompose yet.
        early: the decompositions applied first (None: `mutation_decompositions()`; a double
            backward's replay graph passes `replay_decompositions()`).
    """
    # Training: the forward stays undecomposed (but functional) so the joint trace differentiates
    # the original ops with their own derivative formulas and decomposes below autograd. Batch norm
    # is decomposed first either way, so that functionalization sees its running-stat updates.
    batch_norms: list[Any] = []
    early = mutation_decompositions(differentiated=training) if early is None else early
    early = _recording(early, BATCH_NORMS, batch_norms)
    writes = WritesIntoViews()
    hidden_box: list[frozenset[int]] = []
    table = early if training else {op: fn for op, fn in decompositions.items() if op not in _DETACH}
    # One functionalized trace where that is faithful (static sizes, nothing in place left over:
    # tracing/single_pass.py), else decompose first and functionalize in a second trace. Nodes
    # keep the user's `stack_trace` through every trace (FX interpreters pass it on).
    with fx_traceback.preserve_node_meta():
        try:
            if not traceable_in_one_pass(fake_inputs):
                raise SinglePassUnsupported("symbolic sizes")
            if not training:
                # Inference graphs keep the two-pass trace verified on the GPU benchmark: under
                # CUDA autocast the one-pass graph of BERT-base's inference (its padding-mask ops)
                # gave a wrong result there, not yet reproduced on CPU (docs/aotgrad.md).
                raise SinglePassUnsupported("inference graph")
            functional, spec = _trace_in_one_pass(
                fn, fake_inputs, early, {**table, **early}, training, writes, hidden_box
            )
        except Exception as error:  # what one pass cannot do, two passes trace (or report)
            log.debug("aotgrad: tracing the forward in two passes (%s: %s)", type(error).__name__, error)
            functional, spec = _trace_in_two_passes(fn, fake_inputs, early, table, training, writes, hidden_box)
    if not training:
        _drop_detaches(functional)
    draw_random_in_memory_order(functional, recompile=False)
    graph = _rewrite_outputs(functional, spec)
    graph.decomposed_batch_norm = bool(batch_norms)
    graph.writes_into_views = writes.seen
    graph.hidden_mutations = tuple(i for i in graph.mutated_inputs if hidden_box and i in hidden_box[-1])
    return graph


def trace_with_writes(
    fn: Callable[..., Any], fake_inputs: Sequence[Any], forward: FunctionalGraph, early: DecompositionTable
) -> torch.fx.GraphModule | None:
    """`fn`'s forward as a graph that keeps its in-place ops and views (not functionalized), with
    `forward`'s outputs: ``(*new values of mutated inputs, *graph outputs)``. For a double backward's
    replay: run under autograd, its writes into views record eager's own autograd nodes
    (`tracing/view_writes.py`). The mutated inputs are cloned first inside the graph, so a replay
    writes into copies (with the inputs' history), never into the region's inputs.

    None where a graph output is not a user output as it is (outputs viewing a common base).
    """
    positions = _graph_output_positions(forward)
    if positions is None:
        return None
    mutated = set(forward.mutated_inputs)
    spec_box: list[pytree.TreeSpec] = []
    flat_fn = _flat_traceable(fn, True, spec_box)

    def replayed(*args: Any) -> list[Any]:
        copies = [x.clone() if i in mutated else x for i, x in enumerate(args)]
        leaves = flat_fn(*copies)
        return [*(copies[i] for i in forward.mutated_inputs), *(leaves[j] for j in positions)]

    with torch.enable_grad():
        return make_fx(replayed, decomposition_table=early)(*fake_inputs)


def _graph_output_positions(forward: FunctionalGraph) -> list[int] | None:
    """Per graph output of `forward`, the flat user output that is it (no views in between), or None."""
    positions: dict[int, int] = {}
    for j, spec in enumerate(forward.outputs):
        if spec.kind == "graph":
            if spec.views:
                return None
            positions.setdefault(spec.index, j)
    if sorted(positions) != list(range(forward.num_graph_outputs)):
        return None
    return [positions[i] for i in range(forward.num_graph_outputs)]


def _recording(table: DecompositionTable, packets: tuple[Any, ...], seen: list[Any]) -> DecompositionTable:
    """`table` with the decompositions of `packets`' overloads noting in `seen` each op they decompose."""

    def noting(op: Any, decomposition: Callable[..., Any]) -> Callable[..., Any]:
        def decompose(*args: Any, **kwargs: Any) -> Any:
            result = decomposition(*args, **kwargs)
            if result is not NotImplemented:  # NotImplemented: the op stays whole
                seen.append(op)
            return result

        return decompose

    return {op: noting(op, fn) if op.overloadpacket in packets else fn for op, fn in table.items()}


def _flat_traceable(
    fn: Callable[..., Any],
    training: bool,
    spec_box: list[pytree.TreeSpec],
    writes: WritesIntoViews | None = None,
    hidden_box: list[frozenset[int]] | None = None,
) -> Callable[..., list[Any]]:
    """`fn` returning its flat output leaves (their structure goes to `spec_box`), with eager's
    argument checks (`EagerChecks`), and when training the gradient barriers, the straight-through
    writes autograd does not record (`HiddenWrites`: the inputs written only so go to `hidden_box`)
    and the custom-backward check; `writes` notes writes into views."""

    def flat_fn(*args: Any) -> list[Any]:
        barrier = BarrierSwitch()
        hidden = HiddenWrites(args, barrier) if training else None
        with (
            writes if writes is not None else contextlib.nullcontext(),
            EagerChecks(),
            RecurrentInFloat32(),
            _GradientBarriers(barrier) if training else contextlib.nullcontext(),
            hidden if hidden is not None else contextlib.nullcontext(),
        ):
            leaves, spec = pytree.tree_flatten(fn(*args))
        if training:
            _check_no_custom_backward(leaves)
        if hidden is not None and hidden_box is not None:
            hidden_box.append(hidden.hidden_only)
        spec_box.append(spec)
        return leaves

    return flat_fn


def _trace_in_one_pass(
    fn: Callable[..., Any],
    fake_inputs: Sequence[Any],
    early: DecompositionTable,
    table: DecompositionTable,
    training: bool,
    writes: WritesIntoViews | None = None,
    hidden_box: list[frozenset[int]] | None = None,
) -> tuple[torch.fx.GraphModule, pytree.TreeSpec]:
    """`make_fx(functionalize(fn))`: one trace, with training-mode batch norm called as the op that
    declares its update of the running statistics (`tracing/single_pass.py`). Raises
    `SinglePassUnsupported` where only two passes are faithful."""
    spec_box: list[pytree.TreeSpec] = []
    flat_fn = _flat_traceable(fn, training, spec_box, writes, hidden_box)

    def watched(*args: Any) -> list[Any]:
        before = input_metadata(args)
        with BatchNormAboveFunctionalization(early), OverlapWatch():
            leaves = flat_fn(*args)
        check_input_metadata_kept(before, args)
        return leaves

    run = torch.func.functionalize(watched, remove="mutations")
    with torch.enable_grad() if training else torch.no_grad():
        functional = make_fx(run, decomposition_table=table)(*fake_inputs)
    check_one_pass_graph(functional)
    materialize_runtime_asserts(functional)  # the user's `torch._check`s, for every later trace and backend
    truncate_integral_addcmul_values(functional)  # before the joint trace decomposes them
    return functional, spec_box[0]


def _trace_in_two_passes(
    fn: Callable[..., Any],
    fake_inputs: Sequence[Any],
    early: DecompositionTable,
    table: DecompositionTable,
    training: bool,
    writes: WritesIntoViews | None = None,
    hidden_box: list[frozenset[int]] | None = None,
) -> tuple[torch.fx.GraphModule, pytree.TreeSpec]:
    """Decompose first with mutations still visible (`make_fx` with `early`), then functionalize
    that graph (with its tensor constants passed in as inputs) in a second trace."""
    spec_box: list[pytree.TreeSpec] = []
    flat_fn = _flat_traceable(fn, training, spec_box, writes, hidden_box)

    def checked(*args: Any) -> list[Any]:
        with OverlapChecks(args):  # in-place writes into tensors whose elements share memory
            return flat_fn(*args)

    with torch.enable_grad() if training else torch.no_grad():
        decomposed = make_fx(checked, decomposition_table=early)(*fake_inputs)
    _check_no_metadata_mutation(decomposed)
    materialize_runtime_asserts(decomposed)  # the user's `torch._check`s: the second trace keeps them
    views_as_reshapes(decomposed, recompile=False)
    truncate_integral_addcmul_values(decomposed)
    # ...then functionalize: in-place ops become out-of-place, input mutations trailing copies.
    constants = _lift_tensor_constants(decomposed)
    run = torch.func.functionalize(torch.fx.Interpreter(decomposed).run, remove="mutations")
    fresh_unbacked_symbols(fake_inputs)  # not the first pass's symbols, which checks may have pinned
    try:
        # The first pass applied the caller's autocast (and the graph's own autocast blocks): its
        # ATen ops hold the casts. Traced again under that autocast they would be cast twice (a
        # matmul in a `torch.autocast(enabled=False)` block would become bfloat16).
        with torch.no_grad(), torch._C._DisableAutocast():
            functional = make_fx(lambda *args: run(*args, *constants), decomposition_table=table)(*fake_inputs)
            if _writes_of_decompositions(functional):
                functional = _functionalized_again(functional, fake_inputs, table)
    except RuntimeError as error:
        raise _explained_functionalization_failure(error, decomposed) from error
    return functional, spec_box[0]


def _writes_of_decompositions(gm: torch.fx.GraphModule) -> bool:
    """Whether `gm` (a functionalized trace) still writes in place into a tensor other than an input.

    make_fx applies the decomposition table below functionalization, so an in-place op inside a
    decomposition is recorded as it is: torch 2.11 decomposes `index_fill` of a non-contiguous tensor
    into `empty_like(x).copy_(filled)` (fuzz 88a60d62fa). Functionalization's own `copy_`s into inputs
    and random ops drawing into a tensor (`bernoulli_`, kept on purpose) are not such writes.
    """
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        if not target._schema.is_mutable or torch.Tag.nondeterministic_seeded in target.tags:
            continue
        written = node.args[0] if node.args else None
        if not (isinstance(written, torch.fx.Node) and written.op == "placeholder"):
            return True
    return False


def _functionalized_again(
    gm: torch.fx.GraphModule, fake_inputs: Sequence[Any], table: DecompositionTable
) -> torch.fx.GraphModule:
    """`gm` traced once more under functionalization, so that the writes its decompositions made
    become out-of-place ops (their own decompositions, if any, apply again)."""
    constants = _lift_tensor_constants(gm)
    run = torch.func.functionalize(torch.fx.Interpreter(gm).run, remove="mutations")
    fresh_unbacked_symbols(fake_inputs)
    return make_fx(lambda *args: run(*args, *constants), decomposition_table=table)(*fake_inputs)


_SUMS_PROMOTE = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32})


def _explained_functionalization_failure(error: RuntimeError, gm: torch.fx.GraphModule) -> Exception:
    """torch's functionalization folds a write through an `expand`ed view back into its base with a
    subtraction and a sum, which fails for bool and promotes integers narrower than int64 (tripping
    its own assertion): say so."""
    if "FunctionalTensorWrapper" not in str(error) and "with two bool tensors" not in str(error):
        return error
    expands = [
        node for node in gm.graph.nodes
        if node.target is aten.expand.default and getattr(node.meta.get("val"), "dtype", None) in _SUMS_PROMOTE
    ]
    if not expands:
        return error
    dtype = expands[0].meta["val"].dtype
    # The user's line: that of an in-place op of that dtype, else of the expand.
    writes = [
        node for node in gm.graph.nodes
        if isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable
        and getattr(node.meta.get("val"), "dtype", None) == dtype and node.meta.get("stack_trace")
    ]
    return EagerOnlyWriteError(
        f"an in-place write through an `expand`ed {dtype} tensor (or into an expanded {dtype} input), "
        "which torch's functionalization cannot express for this dtype, so this graph runs eagerly; to "
        "compile it, write into a `clone()` of the expanded tensor, or use int64",
        location_from_stack_trace((writes or expands)[0].meta.get("stack_trace")),
    )
