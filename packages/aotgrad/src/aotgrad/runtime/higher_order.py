"""Double backward through a compiled region: its gradients recomputed differentiably.

The compiled backward is opaque to autograd: run under ``create_graph=True`` (a gradient penalty, a
Hessian-vector product, `torch.autograd.functional.hessian`) it would return gradients without
history, and a second differentiation would silently miss the region's second-order terms. So when
grad mode is on inside the backward, the region's functional forward graph is replayed eagerly on
the region's inputs and differentiated with ``torch.autograd.grad(..., create_graph=True)``: eager's
own derivative formulas, so higher-order gradients are eager's. The compiled backward keeps serving
every first-order backward. Batch norm, decomposed in that graph before autograd, would be
differentiated as its decomposition, whose gradients lack history where eager's fused backward gives
them some (the weight's, when only the weight requires grad): a region with a batch norm replays a
graph traced again with batch norm whole (`eager_replay`, once per input signature); so does a region
that writes in place into a view, with a graph that keeps its in-place ops, whose replay records eager's
own autograd nodes for them (`tracing/view_writes.py`).

A replay is faithful only when it recomputes what the compiled forward computed. A region that
updates an input in place replays on a copy of that input's old value, taken before the forward
ran (`kept_before_mutation`: only inputs the differentiable outputs read, e.g. an in-place
`x.t().div_(w)`, or BatchNorm's running statistics in training mode). A copy of an input that requires
grad is taken with grad mode on, so the replay's gradients keep the old value's history. A region that
draws random numbers (a replay would draw others) cannot be replayed: its gradients then carry a node
that raises a clear error if they are differentiated again, instead of dropping that term.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from aotgrad.errors import location_from_stack_trace
from aotgrad.tracing.functional import FunctionalGraph
from aotgrad.tracing.graph_passes import is_random, output_values, placeholders
from aotgrad.tracing.joint import ReplayInterpreter

__all__ = ["DifferentiableBackward", "graph_task_keeps_graph"]

_WHAT_TO_DO = (
    "Compute the higher-order gradient outside the compiled function, or run the function whose "
    "gradient is differentiated eagerly (with Kiln: decorate it with `frontend.disable`)."
)


_KEEPS_GRAPH = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)


def graph_task_keeps_graph() -> bool:
    """Whether the running backward was called with ``retain_graph=True`` (or ``create_graph``):
    then the region's inputs must stay for a later backward. True when torch cannot say."""
    return True if _KEEPS_GRAPH is None else bool(_KEEPS_GRAPH())


def _where(node: torch.fx.Node) -> str:
    location = location_from_stack_trace(node.meta.get("stack_trace"))
    return f" (at {location})" if location else ""


def _read_inputs(graph: torch.fx.Graph, outputs: Sequence[int]) -> set[int]:
    """Indices of the placeholders that the graph outputs at `outputs` depend on."""
    values = output_values(graph)
    pending = [values[i] for i in outputs if isinstance(values[i], torch.fx.Node)]
    seen: set[torch.fx.Node] = set()
    while pending:
        node = pending.pop()
        if node not in seen:
            seen.add(node)
            pending.extend(node.all_input_nodes)
    return {i for i, node in enumerate(placeholders(graph)) if node in seen}


def _signature(inputs: Sequence[Any]) -> tuple[Any, ...]:
    """What a graph traced from `inputs` with static sizes is specialized to."""
    return tuple(
        (tuple(x.shape), x.stride(), x.dtype, x.device, x.requires_grad)
        if isinstance(x, torch.Tensor)
        else x if isinstance(x, (bool, int, float, str, type(None))) else type(x)
        for x in inputs
    )


def _has_symbolic_sizes(gm: torch.fx.GraphModule) -> bool:
    """Whether `gm` was traced with symbolic sizes. Fake tensors decompose there the ops whose C++
    meta kernel takes no symbolic size (``hardshrink`` into ``where(|x| <= 0.5, 0, x)``), and
    differentiating such a decomposition is not eager's formula: ``hardshrink``'s gradient lost the
    history eager's ``hardshrink_backward`` has (fuzz 2aef1325d5). Its replay is traced again at the
    call's sizes (`eager_replay`), where those ops stay whole."""
    for node in placeholders(gm.graph):
        value = node.meta.get("val")
        if isinstance(value, torch.SymInt):
            return True
        if isinstance(value, torch.Tensor) and any(
            isinstance(n, torch.SymInt) for n in (*value.shape, *value.stride(), value.storage_offset())
        ):
            return True
    return False


def _why_not_replayable(forward: FunctionalGraph) -> str | None:
    """Why replaying `forward` would not recompute what the compiled forward did, or None."""
    for node in forward.gm.graph.nodes:
        if node.op == "call_function" and is_random(node):
            return f"the graph draws random numbers{_where(node)} (e.g. dropout), and recomputing it would draw others"
    return None


@dataclasses.dataclass(frozen=True)
class DifferentiableBackward:
    """A region's gradients, recomputed with history for a backward under ``create_graph=True``.

    Attributes:
        forward: the functional forward graph, ``(*inputs) -> (*graph outputs)``; None for a region
            restored from a saved plan (`aotgrad.plans`), whose graph `retrace` makes on first use.
        grad_inputs: input indices whose gradient the region returns, in order.
        differentiable_outputs: forward-output indices that receive a tangent.
        unsupported: why this region cannot be replayed (None: it can).
        retrace: traces the forward graph again from the region's inputs (when `forward` is None).
        eager_replay: traces, from the region's inputs, a forward graph with batch norm whole (see
            `replay_decompositions`) or keeping the forward's writes into views, at static sizes,
            replayed in place of `forward`; it returns None where that graph is not possible, and is
            None where `forward` has neither a decomposed batch norm nor writes into views and was
            traced at static sizes (`_has_symbolic_sizes`).
        whole_graphs: those graphs per input signature (shapes, strides, dtypes), and those
            `retrace` made, keyed ``("retraced", signature)``.
    """

    forward: torch.fx.GraphModule | None
    grad_inputs: tuple[int, ...]
    differentiable_outputs: tuple[int, ...]
    unsupported: str | None = None
    kept_before_mutation: tuple[int, ...] = ()
    retrace: Callable[[Sequence[Any]], torch.fx.GraphModule] | None = None
    eager_replay: Callable[[Sequence[Any]], torch.fx.GraphModule | None] | None = None
    whole_graphs: dict[tuple[Any, ...], torch.fx.GraphModule | None] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )

    @staticmethod
    def for_region(
        forward: FunctionalGraph,
        grad_inputs: tuple[int, ...],
        differentiable_outputs: tuple[int, ...],
        eager_replay: Callable[[Sequence[Any]], torch.fx.GraphModule | None] | None = None,
    ) -> DifferentiableBackward:
        """The replay of `forward`, or a record of why it cannot be replayed."""
        read = _read_inputs(forward.gm.graph, differentiable_outputs)
        kept = tuple(i for i in forward.mutated_inputs if i in read)
        unsupported = _why_not_replayable(forward)
        retraced = forward.decomposed_batch_norm or forward.writes_into_views or _has_symbolic_sizes(forward.gm)
        eager_replay = eager_replay if retraced else None
        return DifferentiableBackward(
            forward.gm, grad_inputs, differentiable_outputs, unsupported, kept, eager_replay=eager_replay
        )

    def inputs_to_keep(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """The region's inputs for a later replay, called before the forward: those it updates
        in place (and the differentiable outputs read) copied, as the forward overwrites them.

        A copy of an input that requires grad (an activation updated by ``out += identity``) is
        taken with grad mode on, even inside the autograd.Function's forward: the replay then
        differentiates through the copy back into the old value's history, as eager would.
        """
        if not self.kept_before_mutation or self.unsupported is not None:
            return inputs
        kept = list(inputs)
        with torch.enable_grad():
            for index in self.kept_before_mutation:
                if isinstance(kept[index], torch.Tensor):
                    kept[index] = kept[index].clone()
        return kept

    def inputs_not_kept(self) -> RuntimeError:
        """The error for a backward under create_graph=True whose region's inputs were not kept."""
        return RuntimeError(
            "double backward (create_graph=True) through this compiled graph is not supported here: its inputs "
            "were not kept (its forward ran under saved-tensor hooks, such as activation checkpointing or "
            "offloading to the CPU, or an earlier backward without retain_graph=True freed them). " + _WHAT_TO_DO
        )

    def gradients(self, inputs: Sequence[Any], grad_outputs: Sequence[Any]) -> list[Any]:
        """Gradients of `grad_inputs` (in order; None where unused) that autograd can differentiate.

        Args:
            inputs: the region's inputs as the forward received them.
            grad_outputs: one gradient (or None) per forward output.
        """
        # A view per differentiated input: the gradient of each use is its own (an input passed
        # twice gets two gradients, as in the joint trace), and it still leads back to the input,
        # so the recomputed gradients have the input's history.
        replay = list(inputs)
        for index in self.grad_inputs:
            replay[index] = replay[index].view_as(replay[index])
        forward = self._replay_graph(inputs)
        with torch.enable_grad(), torch._C._DisableAutocast():
            outputs = ReplayInterpreter(forward).run(*replay)
        pairs = [
            (outputs[i], grad_outputs[i])
            for i in self.differentiable_outputs
            if grad_outputs[i] is not None and isinstance(outputs[i], torch.Tensor) and outputs[i].requires_grad
        ]
        wanted = [replay[i] for i in self.grad_inputs]
        if not pairs or not wanted:
            return [None] * len(wanted)
        grads = torch.autograd.grad(
            [out for out, _ in pairs], wanted, [grad for _, grad in pairs], create_graph=True, allow_unused=True
        )
        return list(grads)

    def _replay_graph(self, inputs: Sequence[Any]) -> torch.fx.GraphModule:
        """The graph to replay: with batch norm whole (`eager_replay`), traced once per input
        signature (sizes are static in it); else the region's own, or where it was not kept, one
        traced again (`retrace`) once per input signature."""
        if self.eager_replay is not None:
            key = _signature(inputs)
            if key not in self.whole_graphs:
                self.whole_graphs[key] = self.eager_replay(inputs)
            whole = self.whole_graphs[key]
            if whole is not None:
                return whole
        if self.forward is not None:
            return self.forward
        assert self.retrace is not None, "a DifferentiableBackward needs its forward graph or a way to trace it"
        # Traced from this call's inputs, so at their sizes: once per input signature (a region of
        # symbolic sizes replayed one traced at its first double backward's at every size).
        key = ("retraced", _signature(inputs))
        retraced = self.whole_graphs.get(key)
        if retraced is None:
            retraced = self.whole_graphs[key] = self.retrace(inputs)
        return retraced

    def refuse(self, grads: Sequence[Any], inputs: Sequence[Any]) -> tuple[Any, ...]:
        """`grads` (first-order, from the compiled backward) behind a node that raises why this
        region cannot be differentiated twice, should a second backward reach it.

        The node hangs off the inputs the gradients depend on, so any later differentiation
        towards them passes through it (off a mere placeholder, `autograd.grad` would skip it).
        """
        message = (
            f"double backward (create_graph=True) through this compiled graph is not supported: {self.unsupported}. "
            + _WHAT_TO_DO
        )
        tensors = [g for g in grads if isinstance(g, torch.Tensor)]
        anchors = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
        if not tensors or not anchors:
            return tuple(grads)
        guarded = iter(torch._C._functions.DelayedError(message, len(tensors) + len(anchors))(*tensors, *anchors))
        return tuple(next(guarded) if isinstance(g, torch.Tensor) else g for g in grads)
