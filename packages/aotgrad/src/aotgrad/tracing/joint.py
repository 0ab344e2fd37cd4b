"""Stage 2: a functional forward graph ─► the joint forward+backward graph, traced with make_fx.

The joint graph takes `(*primals, *tangents)` and returns `(*forward outputs, *gradients)`: the
forward outputs are those of the `FunctionalGraph` (mutated-input values first), the gradients
are those of the primals in `grad_inputs`, given one tangent per output in
`differentiable_outputs`. Placeholders are named `primals_<i>` and `tangents_<i>` (numbered over the
floating outputs: an output that needs no tangent leaves a gap).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx

from aotgrad.decompositions import DecompositionSource, DecompositionTable, joint_decompositions
from aotgrad.tracing.derivative_fixes import rrelu_from_drawn_slopes
from aotgrad.tracing.evenly_distributed import select_evenly_distributed_gradients
from aotgrad.tracing.functional import FunctionalGraph
from aotgrad.tracing.graph_passes import clean, output_values, placeholders
from aotgrad.tracing.hidden_writes import (
    STRAIGHT_THROUGH,
    bump_version_of_overwritten,
    fold_straight_through_copies,
    straight_through_in_joint,
)
from aotgrad.tracing.replay_ops import REPLAY_OVERRIDES
from aotgrad.tracing.runtime_asserts import fresh_unbacked_symbols

aten = torch.ops.aten


@dataclasses.dataclass
class JointGraph:
    """A traced joint forward+backward graph, the input a partitioner splits.

    Attributes:
        gm: `(*primals, *tangents) -> (*forward outputs, *gradients of grad_inputs)`.
        num_primals: number of primal (forward input) placeholders.
        num_fwd_outputs: number of forward outputs at the front of the output tuple.
        grad_inputs: primal indices whose gradient the graph returns, in output order.
        differentiable_outputs: forward-output indices that receive a tangent, in placeholder order.
        raising_outputs: differentiable outputs whose backward reaches an op without a derivative
            (`aten.floor_divide`...), with eager's error: the graph ignores their tangents, and a
            backward that gives them a gradient raises that error, as eager's does (only then).
    """

    gm: torch.fx.GraphModule
    num_primals: int
    num_fwd_outputs: int
    grad_inputs: tuple[int, ...]
    differentiable_outputs: tuple[int, ...]
    raising_outputs: dict[int, str] = dataclasses.field(default_factory=dict)

    @property
    def num_tangents(self) -> int:
        """Number of tangent placeholders."""
        return len(self.differentiable_outputs)


def _requires_grad(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _as_primals(inputs: Sequence[Any], grad_mask: Sequence[bool]) -> list[Any]:
    """Distinct leaves that require grad exactly where `grad_mask` says: the inputs themselves where
    they already are such leaves (the usual case: a detach per input is a node per input to trace),
    else detached copies (an input passed twice gets its own leaf, and so its own gradient)."""
    seen: set[int] = set()
    primals = []
    for x, wants in zip(inputs, grad_mask):
        if isinstance(x, torch.Tensor):
            reuse = x.is_leaf and x.requires_grad == wants and id(x) not in seen
            seen.add(id(x))
            x = x if reuse else x.detach().requires_grad_(wants)
        primals.append(x)
    return primals


class ReplayInterpreter(torch.fx.Interpreter):
    """Runs the functional forward with each `view` replayed as a `reshape`, and the ops of
    `REPLAY_OVERRIDES` (functionalization's `copy`, `prod`) with the derivative eager's op has.

    The forward's views were recorded for the strides its ops had undecomposed; decomposed below
    autograd they may differ, so each view re-decides view-or-copy (where a view is possible,
    `reshape` is one). The forward graph itself is not copied or changed.
    """

    def run_node(self, n: torch.fx.Node) -> Any:
        """Run node `n`; a straight-through write with the value it overwrites (`hidden_writes.py`)."""
        if n.target is STRAIGHT_THROUGH:
            args: Any = self.map_nodes_to_values(n.args, n)
            return straight_through_in_joint(*args)
        result = super().run_node(n)
        if any(user.target is STRAIGHT_THROUGH and user.args[0] is n for user in n.users):
            # `n` is the copy of the value a write overwrites: the write bumps that value's version.
            overwritten: Any = self.map_nodes_to_values(n.args, n)
            bump_version_of_overwritten(overwritten[0])
        return result

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        """Call `target`, a `reshape` where the graph says `view`."""
        if target is aten.view.default:
            target = aten.reshape.default
        else:
            target = REPLAY_OVERRIDES.get(target, target)
        return super().call_function(target, args, kwargs)


def _tangent_candidates(forward: FunctionalGraph) -> list[int]:
    """Forward outputs that may carry a gradient: the floating (or complex) user outputs, and the
    new values of `forward.differentiable_mutations`."""
    values = output_values(forward.gm.graph)
    differentiable_mutations = {
        slot for slot, index in enumerate(forward.mutated_inputs) if index in forward.differentiable_mutations
    }
    return [
        i
        for i, node in enumerate(values)
        if (i >= len(forward.mutated_inputs) or i in differentiable_mutations)
        and isinstance(node, torch.fx.Node)
        and isinstance(node.meta.get("val"), torch.Tensor)
        and (node.meta["val"].is_floating_point() or node.meta["val"].is_complex())
    ]


def _mutates(gm: torch.fx.GraphModule) -> bool:
    """Whether `gm` calls an in-place ATen op (some derivative formulas write into views of
    buffers they allocate: `as_strided`'s, `qr`'s, `diagonal`'s...)."""
    return any(
        node.op == "call_function"
        and isinstance(node.target, torch._ops.OpOverload)
        and node.target._schema.is_mutable
        for node in gm.graph.nodes
    )


def _functionalized(
    gm: torch.fx.GraphModule, primals: list[Any], tangents: list[torch.Tensor], table: DecompositionTable
) -> torch.fx.GraphModule:
    """`gm` traced again under functionalization: its in-place ops out of place.

    The partitioner and code generators follow data dependencies only; an in-place write into a
    view (read back through its base) is no data dependency of the base, so it would be cut away
    and the gradient read from a buffer never written. Only joints with such ops pay this trace.
    """
    run = torch.fx.Interpreter(gm).run
    fresh_unbacked_symbols(primals)

    def functional_joint(primals: list[Any], tangents: list[torch.Tensor]) -> Any:
        return run(*primals, *tangents)

    return make_fx(torch.func.functionalize(functional_joint, remove="mutations"), decomposition_table=table)(
        primals, tangents
    )


_MISSING_DERIVATIVE = re.compile(r"derivative for '?[\w:.]+'? is not implemented")


def _missing_derivative(error: RuntimeError) -> str | None:
    """Eager's error for an op without a derivative formula, where `error` is one (else None)."""
    match = _MISSING_DERIVATIVE.search(str(error))
    return str(error).strip().splitlines()[0] if match else None


def _gradients(
    chosen: Sequence[tuple[torch.Tensor, torch.Tensor]], wanted: Sequence[torch.Tensor]
) -> tuple[Sequence[Any], dict[int, str]]:
    """The gradients of `wanted` for (output, tangent) pairs `chosen`, and the positions in `chosen`
    of the outputs left out because their backward reaches an op without a derivative formula,
    with eager's error.

    Eager raises that error only in a backward that reaches the op, so the trace must not: each
    output is tried alone where all together fail (on fake tensors; the failed attempts' nodes
    are dead code, cleaned away)."""
    try:
        outputs, tangents = [out for out, _ in chosen], [t for _, t in chosen]
        return torch.autograd.grad(outputs, wanted, tangents, allow_unused=True, retain_graph=True), {}
    except RuntimeError as error:
        if _missing_derivative(error) is None:
            raise
    raising: dict[int, str] = {}
    for position, (out, tangent) in enumerate(chosen):
        try:
            torch.autograd.grad(out, wanted, tangent, allow_unused=True, retain_graph=True)
        except RuntimeError as error:
            message = _missing_derivative(error)
            if message is None:
                raise
            raising[position] = message
    kept = [pair for position, pair in enumerate(chosen) if position not in raising]
    if not kept:
        return [None] * len(wanted), raising
    grads = torch.autograd.grad([out for out, _ in kept], wanted, [t for _, t in kept], allow_unused=True)
    return grads, raising


def trace_joint(
    forward: FunctionalGraph,
    fake_inputs: Sequence[Any],
    grad_mask: Sequence[bool],
    decompositions: DecompositionSource,
) -> JointGraph:
    """Trace forward and backward of `forward.gm` together, under the active fake mode.

    Args:
        forward: the functional forward graph (stage 1).
        fake_inputs: fake tensors for its inputs.
        grad_mask: per input, whether its gradient is wanted (only floating tensors may say True).
        decompositions: the table make_fx applies to the backward's ops (less `INFERENCE_ONLY`).
    """
    # In place, to eager-equivalent ops: replays of the forward (double backward) want them too.
    rrelu_from_drawn_slopes(forward.gm)
    grad_inputs = tuple(i for i, wants in enumerate(grad_mask) if wants)
    forward_outputs = output_values(forward.gm.graph)
    # A tangent for every output that may need one; which do (they require grad) is seen while
    # tracing, and the other tangents' placeholders are dropped afterwards.
    candidates = _tangent_candidates(forward)
    values = [forward_outputs[i].meta["val"] for i in candidates]
    tangents = [torch.empty(v.shape, dtype=v.dtype, device=v.device) for v in values]
    differentiable_box: list[tuple[int, ...]] = []
    raising: dict[int, str] = {}

    def joint(primals: list[Any], tangents: list[torch.Tensor]) -> tuple[Any, ...]:
        leaves = _as_primals(primals, grad_mask)
        with torch.enable_grad():
            outputs = ReplayInterpreter(forward.gm).run(*leaves)
            chosen = [(i, t) for i, t in zip(candidates, tangents) if _requires_grad(outputs[i])]
            differentiable_box.append(tuple(i for i, _ in chosen))
            wanted = [leaves[i] for i in grad_inputs]
            grads: Sequence[Any] = ()
            if wanted and chosen:
                grads, left_out = _gradients([(outputs[i], t) for i, t in chosen], wanted)
                raising.update((chosen[position][0], message) for position, message in left_out.items())
        grads = list(grads) or [None] * len(wanted)
        return (*(out.detach() if isinstance(out, torch.Tensor) else out for out in outputs), *grads)

    table = joint_decompositions(decompositions)
    fresh_unbacked_symbols(fake_inputs)  # the forward's checks on pinned symbols stay checks
    with fx_traceback.preserve_node_meta():
        gm = make_fx(joint, decomposition_table=table)(list(fake_inputs), tangents)
        if _mutates(gm):
            gm = _functionalized(gm, list(fake_inputs), tangents, table)
    select_evenly_distributed_gradients(gm)
    fold_straight_through_copies(gm)
    differentiable = differentiable_box[0]
    # Tangents of outputs that turned out not to need one were never read: drop their inputs.
    tangent_nodes = placeholders(gm.graph)[len(fake_inputs) :]
    for i, node in zip(candidates, tangent_nodes):
        if i not in differentiable:
            assert not node.users, "an unused tangent was read"
            gm.graph.erase_node(node)
    clean(gm, forward_outputs=len(forward_outputs))
    return JointGraph(gm, len(fake_inputs), len(forward_outputs), grad_inputs, differentiable, dict(raising))
