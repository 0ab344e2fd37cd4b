"""Runs compiled graphs with eager's semantics.

`CompiledTraining` wraps a compiled forward/backward pair in a `torch.autograd.Function`, so
`.backward()` runs the compiled backward as one op; `CompiledInference` runs a compiled forward
alone. `Region` puts either behind the user's calling convention: it writes the new values of
mutated inputs back into the real inputs and rebuilds outputs that alias inputs or each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd.function import once_differentiable
from torch.utils import _pytree as pytree

from aotgrad.runtime.boxed import call_boxed
from aotgrad.runtime.writeback import WriteBack
from aotgrad.tracing.functional import FunctionalGraph


@dataclasses.dataclass
class CompiledInference:
    """A compiled forward, run as it is: `(*inputs) -> (*mutated values, *graph outputs, ...)`."""

    forward: Callable[..., Any]

    def run(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """Call the compiled forward on the flat inputs."""
        return _without_grad(self.forward, inputs)


@dataclasses.dataclass
class CompiledTraining:
    """A compiled forward/backward pair and the bookkeeping to run them under eager autograd.

    Attributes:
        forward: `(*inputs) -> (*forward outputs, *saved)`.
        backward: `(*saved, *tangents) -> (*gradients of grad_inputs)`.
        num_fwd_outputs: forward outputs before the saved values.
        differentiable_outputs: forward outputs that get a tangent, in the backward's order.
        grad_inputs: inputs whose gradient the backward returns, in its order.
        mutated_inputs: inputs the wrapper overwrites after the forward; saved values that share
            their memory are copied first, so the backward sees the values from before.
    """

    forward: Callable[..., Any]
    backward: Callable[..., Any]
    num_fwd_outputs: int
    differentiable_outputs: tuple[int, ...]
    grad_inputs: tuple[int, ...]
    mutated_inputs: tuple[int, ...] = ()
    _function: type[torch.autograd.Function] | None = None

    def run(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """Run the forward through the autograd.Function (or alone when grad mode is off)."""
        if not torch.is_grad_enabled():
            return _without_grad(self.forward, inputs)[: self.num_fwd_outputs]
        if self._function is None:
            self._function = _autograd_function_for(self, len(inputs))
        return list(self._function.apply(*inputs))


def _without_grad(forward: Callable[..., Any], inputs: Sequence[Any]) -> list[Any]:
    """``forward`` called boxed on a copy of ``inputs`` with grad mode off (restored after)."""
    enabled = torch.is_grad_enabled()
    if not enabled:
        return list(call_boxed(forward, list(inputs)))
    torch._C._set_grad_enabled(False)
    try:
        return list(call_boxed(forward, list(inputs)))
    finally:
        torch._C._set_grad_enabled(True)


def _protect_from_mutation(saved: list[Any], slots: list[int], mutated: list[torch.Tensor]) -> None:
    """Clone saved tensors that share memory with an input about to be overwritten."""
    pointers = {t.untyped_storage().data_ptr() for t in mutated}
    for slot in slots:
        if saved[slot].untyped_storage().data_ptr() in pointers:
            saved[slot] = saved[slot].clone()


def _autograd_function_for(plan: CompiledTraining, num_inputs: int) -> type[torch.autograd.Function]:
    """A fresh autograd.Function class bound to `plan` (one per compiled graph)."""
    differentiable = set(plan.differentiable_outputs)

    class CompiledFunction(torch.autograd.Function):
        """The compiled forward and backward as one autograd op."""

        @staticmethod
        def forward(ctx: Any, *inputs: Any) -> tuple[Any, ...]:  # type: ignore[override]
            """Run the compiled forward; keep the saved values for the backward."""
            results = list(call_boxed(plan.forward, list(inputs)))
            outputs, saved = results[: plan.num_fwd_outputs], results[plan.num_fwd_outputs :]
            tensor_slots = [i for i, value in enumerate(saved) if isinstance(value, torch.Tensor)]
            if plan.mutated_inputs:
                _protect_from_mutation(saved, tensor_slots, [inputs[i] for i in plan.mutated_inputs])
            ctx.save_for_backward(*(saved[i] for i in tensor_slots))
            ctx.saved_layout = (len(saved), tensor_slots, {i: v for i, v in enumerate(saved) if i not in tensor_slots})
            ctx.mark_non_differentiable(
                *(out for i, out in enumerate(outputs) if i not in differentiable and isinstance(out, torch.Tensor))
            )
            return tuple(outputs)

        @staticmethod
        @once_differentiable
        def backward(ctx: Any, *grad_outputs: Any) -> tuple[Any, ...]:  # type: ignore[override]
            """Run the compiled backward on the saved values and the tangents."""
            count, tensor_slots, others = ctx.saved_layout
            args: list[Any] = [others.get(i) for i in range(count)]
            for slot, value in zip(tensor_slots, ctx.saved_tensors):
                args[slot] = value
            # The autograd node lets go of the saved values (unless retain_graph): `args` holds
            # the only references, and a boxed backward drops them as it goes.
            ctx.maybe_clear_saved_tensors()
            args += [grad_outputs[i].contiguous() for i in plan.differentiable_outputs]
            grads = list(call_boxed(plan.backward, args))
            result: list[Any] = [None] * num_inputs
            for index, grad in zip(plan.grad_inputs, grads):
                result[index] = grad
            return tuple(result)

    return CompiledFunction


@dataclasses.dataclass
class Region:
    """One compiled graph behind the user's calling convention (flat inputs, flat outputs)."""

    graph: FunctionalGraph
    compiled: CompiledTraining | CompiledInference
    _simple_outputs: int | None = dataclasses.field(default=None, init=False, repr=False)
    _single: bool = dataclasses.field(default=False, init=False, repr=False)
    _flat_tuple: bool = dataclasses.field(default=False, init=False, repr=False)
    _write_back: WriteBack = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        # When every user output is a graph output in order, with no views (the common case),
        # `__call__` slices instead of building each output; -1 marks "build them".
        graph = self.graph
        self._write_back = WriteBack(graph.mutated_inputs)
        simple = not graph.mutated_inputs and all(
            spec.kind == "graph" and spec.index == i and not spec.views for i, spec in enumerate(graph.outputs)
        )
        self._simple_outputs = len(graph.outputs) if simple else -1
        spec = graph.out_spec
        self._single = spec.is_leaf()
        self._flat_tuple = spec.type is tuple and all(spec.child(i).is_leaf() for i in range(spec.num_children))

    def unflatten(self, flat_outputs: list[Any]) -> Any:
        """The user's output structure from the flat outputs (a leaf and a flat tuple are quick)."""
        if self._single:
            return flat_outputs[0]
        if self._flat_tuple:
            return tuple(flat_outputs)
        return pytree.tree_unflatten(flat_outputs, self.graph.out_spec)

    def __call__(self, inputs: Sequence[Any]) -> list[Any]:
        """Run on the flat inputs; mutate inputs as eager would; return the flat user outputs."""
        results = self.compiled.run(inputs)
        simple = self._simple_outputs
        if simple is not None and simple >= 0:
            return list(results[:simple])
        num_mutations = len(self.graph.mutated_inputs)
        if num_mutations:
            self._write_back(inputs, results)
        graph_outputs = results[num_mutations : num_mutations + self.graph.num_graph_outputs]
        return [spec.build(inputs, graph_outputs) for spec in self.graph.outputs]
