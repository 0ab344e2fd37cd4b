"""Compiled plans: what a compiled region needs to run again in another process, without tracing.

A region (one gradient pattern and input signature of an `AotCallable`) is its runtime metadata
(which inputs it mutates, how each user output is rebuilt, the forward/backward split's bookkeeping)
plus the two compiled graphs. `export_plans` turns every compiled region into a `RegionPlan` whose
compiled graphs are replaced by what the caller's `export` makes of them (a serializable record of
the caller's own design: aotgrad never looks inside); `aot_graph_from_plans` rebuilds an
`AotCallable` whose regions come from plans, each compiled graph rebuilt by the caller's `load`.
Inputs of any other pattern or signature are still traced and compiled on first use.

A restored region's double backward (``create_graph=True``) traces its forward graph again on
first use: the graph itself is not part of a plan.

Example::

    plans = aotgrad.plans.export_plans(compiled, export=lambda fn: fn.record)
    restored = aotgrad.plans.aot_graph_from_plans(gm, inputs, plans, load=load_record, fw_compiler=...)
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx._lazy_graph_module import _use_lazy_graph_module
from torch.utils import _pytree as pytree

from aotgrad.api import AotCallable, _region_key, dynamic_dims_of
from aotgrad.compile import CompilerFn, Compilers, Partitioner, compile_backward, restride_to, trace_region
from aotgrad.config import AotConfig
from aotgrad.decompositions import (
    DecompositionSource,
    DecompositionTable,
    default_decompositions,
    with_eager_values,
)
from aotgrad.partition import min_cut
from aotgrad.runtime import CompiledInference, CompiledTraining, Region
from aotgrad.runtime.absent_tangents import AbsentTangentBackwards, TangentMeta
from aotgrad.runtime.higher_order import DifferentiableBackward
from aotgrad.tracing.functional import FunctionalGraph, OutputSpec
from aotgrad.tracing.graph_passes import output_values, placeholders

log = logging.getLogger("aotgrad")

__all__ = ["NotPlannable", "RegionPlan", "TrainingPlan", "aot_graph_from_plans", "export_plans"]


class NotPlannable(Exception):
    """A compiled callable whose regions cannot be saved as plans; the message says why."""


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """The forward/backward split's bookkeeping of a training region (see `CompiledTraining`).

    Attributes:
        num_fwd_outputs, differentiable_outputs, grad_inputs, mutated_inputs: as in `CompiledTraining`.
        replay_unsupported: why a double backward cannot replay the region (None: it can).
        kept_before_mutation: inputs copied before the forward for such a replay.
        backward: the caller's record of the compiled backward graph.
    """

    num_fwd_outputs: int
    differentiable_outputs: tuple[int, ...]
    grad_inputs: tuple[int, ...]
    mutated_inputs: tuple[int, ...]
    replay_unsupported: str | None
    kept_before_mutation: tuple[int, ...]
    backward: Any


@dataclasses.dataclass(frozen=True)
class RegionPlan:
    """One compiled region without its graphs: enough to run it again (see the module docstring).

    Attributes:
        key: the region's key in its `AotCallable` (gradient pattern, then per-input signature).
        mutated_inputs, num_graph_outputs, outputs, out_spec, differentiable_mutations: the
            functional forward's metadata (`FunctionalGraph`).
        forward: the caller's record of the compiled forward graph.
        training: the training bookkeeping and backward record; None for an inference region.
    """

    key: tuple[Any, ...]
    mutated_inputs: tuple[int, ...]
    num_graph_outputs: int
    outputs: tuple[OutputSpec, ...]
    out_spec: pytree.TreeSpec
    differentiable_mutations: tuple[int, ...]
    forward: Any
    training: TrainingPlan | None


def export_plans(compiled: Any, export: Callable[[Callable[..., Any]], Any]) -> tuple[RegionPlan, ...]:
    """The plans of every region `compiled` (what `aot_graph` returned) has compiled so far.

    Args:
        compiled: an `AotCallable`.
        export: the caller's record of one compiled graph (what its compiler returned); it raises
            `NotPlannable` (or any error) for a graph it cannot record.

    Raises:
        NotPlannable: `compiled` is not an `AotCallable` (a graph split at custom autograd
            Functions), or a region ran eagerly, raises eager's error, takes inputs narrowed
            to their distinct elements, or has a backward that reaches an op without a derivative.
    """
    if not isinstance(compiled, AotCallable):
        raise NotPlannable(f"a {type(compiled).__name__} is not one traced region (custom autograd Functions?)")
    plans = []
    for key, region in compiled._regions.items():
        if not isinstance(region, Region):
            raise NotPlannable("a region runs eagerly or raises eager's error")
        if region.distinct_inputs:
            raise NotPlannable("a region takes inputs with repeated elements")
        if isinstance(region.compiled, CompiledTraining) and region.compiled.raising_outputs:
            raise NotPlannable("a region's backward reaches an op without a derivative formula")
        plans.append(_plan(key, region, export))
    if not plans:
        raise NotPlannable("nothing was compiled")
    return tuple(plans)


def _plan(key: tuple[Any, ...], region: Region, export: Callable[[Callable[..., Any]], Any]) -> RegionPlan:
    graph, run = region.graph, region.compiled
    training = None
    if isinstance(run, CompiledTraining):
        higher = run.higher_order
        training = TrainingPlan(
            num_fwd_outputs=run.num_fwd_outputs,
            differentiable_outputs=run.differentiable_outputs,
            grad_inputs=run.grad_inputs,
            mutated_inputs=run.mutated_inputs,
            replay_unsupported=higher.unsupported if higher is not None else "no replay was prepared",
            kept_before_mutation=higher.kept_before_mutation if higher is not None else (),
            backward=export(run.backward),
        )
    return RegionPlan(
        key=key,
        mutated_inputs=graph.mutated_inputs,
        num_graph_outputs=graph.num_graph_outputs,
        outputs=graph.outputs,
        out_spec=graph.out_spec,
        differentiable_mutations=graph.differentiable_mutations,
        forward=export(run.forward),
        training=training,
    )


def aot_graph_from_plans(
    gm: torch.nn.Module,
    example_inputs: Sequence[Any],
    plans: Sequence[RegionPlan],
    load: Callable[[Any], Callable[..., Any]],
    *,
    fw_compiler: CompilerFn,
    bw_compiler: CompilerFn | None = None,
    partition: Partitioner = min_cut,
    decompositions: DecompositionSource | None = None,
    config: AotConfig | None = None,
) -> AotCallable:
    """What `aot_graph(gm, example_inputs, ...)` returns, its regions rebuilt from `plans`.

    Args:
        gm: the same graph the plans were exported from (its parameters and buffers are read afresh).
        example_inputs: its example inputs (they decide which dims are dynamic, as in `aot_graph`).
        plans: from `export_plans`.
        load: rebuilds a compiled graph from the caller's record (may raise: nothing is half-built).
        fw_compiler, bw_compiler, partition, decompositions, config: as for `aot_graph`, for
            regions of new gradient patterns or input signatures.
    """
    config = config or AotConfig()
    compiled = AotCallable(gm, gm, Compilers(fw_compiler, bw_compiler or fw_compiler), partition, decompositions, config)
    compiled._dynamic = dynamic_dims_of([*compiled.state_tensors(), *example_inputs])

    @functools.cache
    def table() -> DecompositionTable:
        # Only a double backward's replay traces again: most loads never build the table.
        return default_decompositions() if decompositions is None else with_eager_values(decompositions)

    # Fake example inputs (symbolic sizes) stay at hand to trace their region's backward graph again
    # (`_backward_graph_source`); real ones are not kept (they would keep activations alive).
    flat = [*compiled.state_tensors(), *example_inputs]
    fake = any(isinstance(x, FakeTensor) for x in example_inputs)
    example = (_region_key(flat, compiled._dynamic)[1:], flat) if fake else None
    regions = {plan.key: _region(plan, load, compiled, table, example) for plan in plans}
    compiled._regions.update(regions)
    return compiled


def _region(
    plan: RegionPlan,
    load: Callable[[Any], Callable[..., Any]],
    owner: AotCallable,
    table: Callable[[], DecompositionTable],
    example: tuple[tuple[Any, ...], list[Any]] | None = None,
) -> Region:
    # The forward graph itself is not kept: only the double-backward replay needs it (traced then).
    graph = FunctionalGraph(
        gm=cast(torch.fx.GraphModule, None),
        mutated_inputs=plan.mutated_inputs,
        num_graph_outputs=plan.num_graph_outputs,
        outputs=plan.outputs,
        out_spec=plan.out_spec,
        differentiable_mutations=plan.differentiable_mutations,
    )
    forward = load(plan.forward)
    training = plan.training
    if training is None:
        return Region(graph, CompiledInference(forward))
    grad_mask = plan.key[0]

    def retrace(inputs: Sequence[Any]) -> torch.fx.GraphModule:
        with torch._C._DisableAutocast():
            return trace_region(owner._traceable(), list(inputs), grad_mask, table()).forward.gm

    higher = DifferentiableBackward(
        None, training.grad_inputs, training.differentiable_outputs, training.replay_unsupported,
        training.kept_before_mutation, retrace,
    )
    absent_tangents = AbsentTangentBackwards(
        None,
        0,
        functools.partial(compile_backward, owner._compilers.backward),
        len(training.grad_inputs),
        graph_source=_backward_graph_source(plan, training, owner, table, example),
    )
    return Region(
        graph,
        CompiledTraining(
            forward=forward,
            backward=load(training.backward),
            absent_tangents=absent_tangents,
            num_fwd_outputs=training.num_fwd_outputs,
            differentiable_outputs=training.differentiable_outputs,
            grad_inputs=training.grad_inputs,
            mutated_inputs=training.mutated_inputs,
            higher_order=higher,
        ),
    )


def _backward_graph_source(
    plan: RegionPlan,
    training: TrainingPlan,
    owner: AotCallable,
    table: Callable[[], DecompositionTable],
    example: tuple[tuple[Any, ...], list[Any]] | None,
) -> Callable[[Sequence[Any] | None, Sequence[Any], Sequence[TangentMeta]], torch.fx.GraphModule | None]:
    """For a restored region, its backward graph traced again on first need (a call where some outputs
    get no gradient, `AbsentTangentBackwards`): from the fake example inputs it was compiled from
    (symbolic sizes), or from the region's inputs of that call where its sizes are static. None where
    neither fits, or where the graph does not line up with the loaded forward's saved values and
    outputs (a region traced under autocast, say: the trace here runs outside it)."""
    grad_mask = plan.key[0]

    def source(
        inputs: Sequence[Any] | None, saved: Sequence[Any], metas: Sequence[TangentMeta]
    ) -> torch.fx.GraphModule | None:
        if example is not None and example[0] == plan.key[1:]:
            traced_from = example[1]
        elif inputs is not None and _region_key(inputs)[1:] == plan.key[1:]:
            traced_from = list(inputs)
        else:
            return None
        try:
            # As the region was compiled: with grad mode on (a backward runs with it off).
            with torch.enable_grad(), torch._C._DisableAutocast(), _use_lazy_graph_module(True):
                traced = trace_region(owner._traceable(), traced_from, grad_mask, table())
                assert traced.joint is not None
                backward = owner._partition(traced.joint)[1]
        except Exception as error:  # the region's own backward still runs (with zeros)
            log.debug("aotgrad: the backward graph of a restored region could not be traced: %s", error)
            return None
        return backward if _lines_up(backward, training, saved, metas) else None

    return source


def _lines_up(
    backward: torch.fx.GraphModule, training: TrainingPlan, saved: Sequence[Any], metas: Sequence[TangentMeta]
) -> bool:
    """Whether `backward` takes the loaded forward's saved values and tangents for its outputs (of
    their dtypes and static sizes) and returns a gradient per gradient input; its saved values'
    placeholders then get those values' strides."""
    inputs = placeholders(backward.graph)
    if len(inputs) != len(saved) + len(metas) or len(output_values(backward.graph)) != len(training.grad_inputs):
        return False
    described = [
        (value.shape, value.dtype) if isinstance(value, torch.Tensor) else None for value in saved
    ] + [(shape, dtype) for shape, dtype, _ in metas]
    for node, expected in zip(inputs, described):
        val = node.meta.get("val")
        if expected is None or not isinstance(val, torch.Tensor):
            if (expected is None) != (not isinstance(val, torch.Tensor)):
                return False
            continue
        shape, dtype = expected
        if val.dtype != dtype or val.dim() != len(shape):
            return False
        if any(isinstance(n, int) and n != m for n, m in zip(val.shape, shape)):
            return False
    restride_to(backward, [value.stride() if isinstance(value, torch.Tensor) else None for value in saved])
    return True
