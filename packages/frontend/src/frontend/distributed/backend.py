"""The compiler capture calls for a model under DDP: each graph cut at DDP's bucket boundaries.

`split_at_ddp_buckets` wraps the frontend's bound backend. Called on a captured graph while a
`DistributedDataParallel` module runs the module it wraps (capture compiles that module; DDP
names itself the active DDP module meanwhile), it plans the graph's buckets from DDP's bucket
capacities, cuts the graph into one subgraph per bucket, compiles each with the wrapped backend
(aotgrad and the kernel backend, as any graph) and returns a `BucketedGraph` running them in turn.
Any other graph goes to the wrapped backend unchanged. ``optimize_ddp=False`` leaves the wrapped
backend alone: one graph, all gradients ready (and all-reduced) at the end of its backward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from capture.distributed import active_data_parallel_module, is_data_parallel
from frontend.context import CompileContext
from frontend.distributed.buckets import BucketCaps, managed_parameters, plan_buckets
from frontend.distributed.split import BucketedGraph, split_graph, subgraph_example_inputs

GraphCompiler = Callable[[torch.fx.GraphModule, list[Any]], Callable[..., Any]]


class BucketSplittingBackend:
    """A ``(gm, example_inputs)`` compiler compiling each DDP bucket's part of a graph on its own.

    Args:
        compiler: the backend each (sub)graph is compiled with.
        context: where plans are logged (the "compile" event), or None.
    """

    def __init__(self, compiler: GraphCompiler, context: CompileContext | None = None) -> None:
        self.compiler = compiler
        self.context = context
        self.__name__ = getattr(compiler, "__name__", "backend")  # how capture's errors name the backend

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        ddp = active_data_parallel_module()
        if ddp is None:
            return self.compiler(gm, example_inputs)
        plan = plan_buckets(gm, example_inputs, BucketCaps.of(ddp), managed_parameters(ddp))
        context = self.context
        if context is not None and context.events.wants("compile"):
            context.events.emit("compile", f"{context.label}: DDP bucket plan, {len(plan)} subgraph(s):\n"
                                           f"{plan.describe()}")
        if len(plan) == 1:
            return self.compiler(gm, example_inputs)
        subgraphs = split_graph(gm, plan)
        compiled = [self.compiler(subgraph.module, subgraph_example_inputs(gm, subgraph, example_inputs))
                    for subgraph in subgraphs]
        return BucketedGraph(gm, plan, subgraphs, compiled)


def split_at_ddp_buckets(compiler: GraphCompiler, model: Any, context: CompileContext) -> GraphCompiler:
    """The compiler to give capture for `model`: `compiler`, cutting graphs at DDP's buckets when asked.

    With ``context.config.optimize_ddp`` off, `compiler` itself. For a DDP `model` its bucket
    capacities are checked here, so a bad ``bucket_cap_mb`` fails at ``frontend.compile``.

    Raises:
        InvalidBucketCapError: `model` is a DDP module with a negative, infinite or NaN bucket capacity.
    """
    if not context.config.optimize_ddp or not torch.distributed.is_available():
        return compiler
    if is_data_parallel(model):
        BucketCaps.of(model)
    return BucketSplittingBackend(compiler, context)
