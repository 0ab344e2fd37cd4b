"""Stage 2: a functional forward graph ─► the joint forward+backward graph, traced with make_fx.

The joint graph takes `(*primals, *tangents)` and returns `(*forward outputs, *gradients)`: the
forward outputs are those of the `FunctionalGraph` (mutated-input values first), the gradients
are those of the primals in `grad_inputs`, given one tangent per output in
`differentiable_outputs`. Placeholders are named `primals_<i>` and `tangents_<i>`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx

from aotgrad.decompositions import DecompositionTable, joint_decompositions
from aotgrad.tracing.functional import FunctionalGraph
from aotgrad.tracing.graph_passes import clean, views_as_reshapes


@dataclasses.dataclass
class JointGraph:
    """A traced joint forward+backward graph, the input a partitioner splits.

    Attributes:
        gm: `(*primals, *tangents) -> (*forward outputs, *gradients of grad_inputs)`.
        num_primals: number of primal (forward input) placeholders.
        num_fwd_outputs: number of forward outputs at the front of the output tuple.
        grad_inputs: primal indices whose gradient the graph returns, in output order.
        differentiable_outputs: forward-output indices that receive a tangent, in placeholder order.
    """

    gm: torch.fx.GraphModule
    num_primals: int
    num_fwd_outputs: int
    grad_inputs: tuple[int, ...]
    differentiable_outputs: tuple[int, ...]

    @property
    def num_tangents(self) -> int:
        """Number of tangent placeholders."""
        return len(self.differentiable_outputs)


def _requires_grad(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _as_primals(inputs: Sequence[Any], grad_mask: Sequence[bool]) -> list[Any]:
    return [
        x.detach().requires_grad_(wants) if isinstance(x, torch.Tensor) else x
        for x, wants in zip(inputs, grad_mask)
    ]


def trace_joint(
    forward: FunctionalGraph,
    fake_inputs: Sequence[Any],
    grad_mask: Sequence[bool],
    decompositions: DecompositionTable,
) -> JointGraph:
    """Trace forward and backward of `forward.gm` together, under the active fake mode.

    Args:
        forward: the functional forward graph (stage 1).
        fake_inputs: fake tensors for its inputs.
        grad_mask: per input, whether its gradient is wanted (only floating tensors may say True).
        decompositions: the table make_fx applies to the backward's ops (less `INFERENCE_ONLY`).
    """
    num_mutations = len(forward.mutated_inputs)
    grad_inputs = tuple(i for i, wants in enumerate(grad_mask) if wants)
    # Which outputs carry gradient: run the forward once on fakes with autograd on.
    with torch.enable_grad():
        probe = forward.gm(*_as_primals(fake_inputs, grad_mask))
    differentiable = tuple(i for i, out in enumerate(probe) if i >= num_mutations and _requires_grad(out))
    tangents = [torch.empty(probe[i].shape, dtype=probe[i].dtype, device=probe[i].device) for i in differentiable]

    # The forward's views were recorded for the strides its ops had undecomposed; decomposed
    # below autograd they may differ, so each view re-decides view-or-copy (`reshape`).
    replayed = views_as_reshapes(torch.fx.GraphModule(forward.gm, copy.deepcopy(forward.gm.graph)))

    def joint(primals: list[Any], tangents: list[torch.Tensor]) -> tuple[Any, ...]:
        leaves = _as_primals(primals, grad_mask)
        with torch.enable_grad():
            outputs = torch.fx.Interpreter(replayed).run(*leaves)
            wanted = [leaves[i] for i in grad_inputs]
            grads: Sequence[Any] = ()
            if wanted and differentiable:
                grads = torch.autograd.grad(
                    [outputs[i] for i in differentiable], wanted, tangents, allow_unused=True
                )
        grads = list(grads) or [None] * len(wanted)
        return (*(out.detach() if isinstance(out, torch.Tensor) else out for out in outputs), *grads)

    with fx_traceback.preserve_node_meta():
        gm = make_fx(joint, decomposition_table=joint_decompositions(decompositions))(list(fake_inputs), tangents)
    clean(gm, differentiated=True)
    return JointGraph(gm, len(fake_inputs), len(probe), grad_inputs, differentiable)
