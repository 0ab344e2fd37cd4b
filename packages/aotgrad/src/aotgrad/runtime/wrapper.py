"""Runs compiled graphs with eager's semantics.

`CompiledTraining` wraps a compiled forward/backward pair in a `torch.autograd.Function`, so
`.backward()` runs the compiled backward as one op (a backward with ``create_graph=True`` recomputes
the gradients differentiably instead: `runtime/higher_order.py`); `CompiledInference` runs a
compiled forward alone. `Region` puts either behind the user's calling convention: it writes the
new values of mutated inputs back into the real inputs and rebuilds outputs that alias inputs or
each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._functorch.utils import unwrap_dead_wrappers
from torch.utils import _pytree as pytree

from aotgrad.runtime.absent_tangents import AbsentTangentBackwards
from aotgrad.runtime.boxed import call_boxed, is_boxed
from aotgrad.runtime.higher_order import DifferentiableBackward, graph_task_keeps_graph
from aotgrad.runtime.writeback import WriteBack
from aotgrad.tracing.functional import FunctionalGraph
from aotgrad.tracing.overlap import OverlappingWriteError, distinct_elements

autocast_enabled = torch._C._is_any_autocast_enabled
"""Whether any device's autocast is on (one C call: checked on every compiled call)."""


@dataclasses.dataclass
class CompiledInference:
    """A compiled forward, run as it is: `(*inputs) -> (*mutated values, *graph outputs, ...)`."""

    forward: Callable[..., Any]
    _boxed: bool = dataclasses.field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self._boxed = is_boxed(self.forward)

    def run(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """Call the compiled forward on the flat inputs (grad mode off while it runs)."""
        if torch.is_grad_enabled():
            return _without_grad(self.forward, inputs)
        # The common case, under torch.no_grad(): call it directly (boxed on a copy it may empty).
        if self._boxed:
            return self.forward(list(inputs))  # type: ignore[no-any-return]
        return self.forward(*inputs)  # type: ignore[no-any-return]


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
        higher_order: recomputes the gradients with history for a backward under
            ``create_graph=True`` (None: such a backward raises).
        raising_outputs: differentiable outputs whose backward reaches an op without a derivative
            formula, with eager's error: raised by a backward that gives one of them a gradient.
        absent_tangents: the backward for calls where some differentiable outputs get no gradient
            (None: the loss did not reach them), derived from the backward graph per pattern; None:
            `backward` gets zeros for them.
    """

    forward: Callable[..., Any]
    backward: Callable[..., Any]
    num_fwd_outputs: int
    differentiable_outputs: tuple[int, ...]
    grad_inputs: tuple[int, ...]
    mutated_inputs: tuple[int, ...] = ()
    higher_order: DifferentiableBackward | None = None
    raising_outputs: dict[int, str] = dataclasses.field(default_factory=dict)
    absent_tangents: AbsentTangentBackwards | None = None
    _function: type[torch.autograd.Function] | None = None
    _apply: Callable[..., Any] | None = None

    def run(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """Run the forward through the autograd.Function (or alone when grad mode is off)."""
        if not torch.is_grad_enabled():
            return _without_grad(self.forward, inputs)[: self.num_fwd_outputs]
        apply = self._apply
        if apply is None:
            self._function = _autograd_function_for(self, len(inputs))
            all_tensors = all(isinstance(x, torch.Tensor) for x in inputs)  # fixed per region (its key)
            apply = self._apply = _fast_apply(self._function, all_tensors)
        return apply(inputs)  # type: ignore[no-any-return]


def _without_grad(forward: Callable[..., Any], inputs: Sequence[Any]) -> Sequence[Any]:
    """``forward`` called boxed on a copy of ``inputs`` with grad mode off (restored after)."""
    if not torch.is_grad_enabled():
        return call_boxed(forward, list(inputs))  # type: ignore[no-any-return]
    torch._C._set_grad_enabled(False)
    try:
        return call_boxed(forward, list(inputs))  # type: ignore[no-any-return]
    finally:
        torch._C._set_grad_enabled(True)


def _fast_apply(function: type[torch.autograd.Function], all_tensors: bool) -> Callable[[Sequence[Any]], Any]:
    """``function.apply(*inputs)`` without `Function.apply`'s per-call Python work.

    `Function.apply` checks for functorch transforms, unwraps dead functorch wrappers with a
    generator over every argument, then calls the C++ apply. This does the same with less Python:
    with no transform active, the C++ apply directly, after unwrapping with one C-level ``map``
    (`all_tensors`: every input of this region is a tensor) or torch's own helper (otherwise).
    """
    try:
        base_apply = torch._C._FunctionBase.__dict__["apply"].__get__(None, function)
        transforms_active = torch._C._are_functorch_transforms_active
        unwrap_if_dead = torch._C._functorch.unwrap_if_dead
    except (AttributeError, KeyError):  # another torch: its own apply, as it is
        return lambda inputs: function.apply(*inputs)

    def apply(inputs: Sequence[Any]) -> Any:
        if transforms_active():
            return function.apply(*inputs)
        if all_tensors:
            return base_apply(*map(unwrap_if_dead, inputs))
        return base_apply(*unwrap_dead_wrappers(tuple(inputs)))

    return apply


def _with_zero_tangents(
    backward: Callable[..., Any], args: list[Any], tangents: Sequence[Any], metas: Sequence[Any]
) -> list[Any]:
    """`backward` on the saved values `args` and `tangents`, zeros (made from `metas`) where absent."""
    args += [
        t.contiguous() if t is not None else torch.zeros(shape, dtype=dtype, device=device)
        for t, (shape, dtype, device) in zip(tangents, metas)
    ]
    return list(call_boxed(backward, args))


def _protect_from_mutation(saved: list[Any], slots: Sequence[int], mutated: list[torch.Tensor]) -> None:
    """Clone saved tensors that share memory with an input about to be overwritten."""
    pointers = {t.untyped_storage().data_ptr() for t in mutated}
    for slot in slots:
        if saved[slot].untyped_storage().data_ptr() in pointers:
            saved[slot] = _copy_keeping_strides(saved[slot])


def _copy_keeping_strides(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` with `t`'s strides: the compiled backward indexes a saved tensor with the
    strides it was traced with, and `clone()` makes a tensor with gaps (`x[:, 1:-1]`) or repeats
    (`expand`) contiguous, which the backward would read out of bounds."""
    copy = t.clone()
    if copy.stride() == t.stride() or t.numel() == 0:
        return copy
    span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    flat = t.as_strided((span,), (1,), t.storage_offset()).clone()
    return flat.as_strided(t.shape, t.stride())


@dataclasses.dataclass
class _SavedLayout:
    """How a compiled forward's saved values are kept, learned on its first call.

    ``plain``: they are all tensors and no input is mutated, so they go to `save_for_backward`
    as they are and come back as `saved_tensors` (the common case); otherwise non-tensors (sizes)
    are kept aside and saved tensors aliasing a mutated input are copied first.
    """

    plain: bool | None = None


def _save_with_layout(ctx: Any, saved: Sequence[Any], inputs: Sequence[Any], mutated: tuple[int, ...]) -> None:
    values = list(saved)
    tensor_slots = [i for i, value in enumerate(values) if isinstance(value, torch.Tensor)]
    if mutated:
        _protect_from_mutation(values, tensor_slots, [inputs[i] for i in mutated])
    ctx.save_for_backward(*(values[i] for i in tensor_slots))
    ctx.saved_layout = (len(values), tensor_slots, {i: v for i, v in enumerate(values) if i not in tensor_slots})


def _restore_with_layout(ctx: Any) -> list[Any]:
    count, tensor_slots, others = ctx.saved_layout
    args: list[Any] = [others.get(i) for i in range(count)]
    for slot, value in zip(tensor_slots, ctx.saved_tensors):
        args[slot] = value
    return args


def _autograd_function_for(plan: CompiledTraining, num_inputs: int) -> type[torch.autograd.Function]:
    """A fresh autograd.Function class bound to `plan` (one per compiled graph).

    Everything that is the same on every call is decided here, not per call: which outputs are
    non-differentiable, where each input's gradient sits among the backward's results, whether
    the compiled graphs are called boxed; the saved values' layout on the first call.
    """
    num_outputs = plan.num_fwd_outputs
    differentiable = plan.differentiable_outputs
    all_differentiable = differentiable == tuple(range(num_outputs))
    non_differentiable = tuple(i for i in range(num_outputs) if i not in set(differentiable))
    compiled_forward, compiled_backward = plan.forward, plan.backward
    forward_boxed = is_boxed(compiled_forward)
    backward_boxed = is_boxed(compiled_backward)
    # Per input, its gradient's index in `[*backward results, None]` (-1: no gradient, None).
    positions = [-1] * num_inputs
    for slot, index in enumerate(plan.grad_inputs):
        positions[index] = slot
    mutated = plan.mutated_inputs
    higher = plan.higher_order
    layout = _SavedLayout()
    contiguous = torch.Tensor.contiguous
    saved_tensor_hooks = torch._C._autograd._top_saved_tensors_default_hooks

    raising = tuple(plan.raising_outputs.items())
    absent_tangents = plan.absent_tangents

    def without_absent_tangents(ctx: Any, args: list[Any], tangents: list[Any]) -> list[Any]:
        metas = ctx.differentiable_metas
        if absent_tangents is None:  # no backward graph to derive one from: zeros for them
            return _with_zero_tangents(compiled_backward, args, tangents, metas)
        return absent_tangents.run(args, tangents, metas, compiled_backward, ctx.region_inputs)

    def run_backward(ctx: Any, *grad_outputs: Any) -> tuple[Any, ...]:
        for index, message in raising:  # as eager's backward, reaching an op without a derivative
            if grad_outputs[index] is not None:
                raise RuntimeError(message)
        args = list(ctx.saved_tensors) if layout.plain else _restore_with_layout(ctx)
        # The autograd node lets go of the saved values (unless retain_graph): `args` holds
        # the only references, and a boxed backward drops them as it goes.
        ctx.maybe_clear_saved_tensors()
        if all_differentiable and not any(g is None for g in grad_outputs):
            args += map(contiguous, grad_outputs)
            grads = [*(compiled_backward(args) if backward_boxed else compiled_backward(*args)), None]
        else:
            tangents = [grad_outputs[i] for i in differentiable]
            if any(t is None for t in tangents):
                # Gradients are not materialized (see `forward`): an output the loss did not reach has
                # None. Eager never runs its backward: the backward here takes it as a structural zero.
                grads = [*without_absent_tangents(ctx, args, tangents), None]
            else:
                args += map(contiguous, tangents)
                grads = [*(compiled_backward(args) if backward_boxed else compiled_backward(*args)), None]
        if not graph_task_keeps_graph():
            ctx.region_inputs = None  # no later backward: let them go, as the saved values are
        return tuple(map(grads.__getitem__, positions))

    def run_backward_with_history(ctx: Any, grad_outputs: tuple[Any, ...]) -> tuple[Any, ...]:
        """The backward under ``create_graph=True``: gradients a second backward can differentiate."""
        higher = plan.higher_order
        if higher is None:
            raise RuntimeError(
                "double backward (create_graph=True) through this compiled graph is not supported; compute the "
                "higher-order gradient outside the compiled function, or run that function eagerly."
            )
        # Unpacking the saved values checks them as eager would (freed by an earlier backward
        # without retain_graph, or changed in place since the forward).
        ctx.saved_tensors  # noqa: B018
        inputs = ctx.region_inputs
        if inputs is None:
            raise higher.inputs_not_kept()
        if higher.unsupported is not None:
            with torch.no_grad():
                first_order = run_backward(ctx, *grad_outputs)
            return higher.refuse(first_order, inputs)
        grads = [*higher.gradients(inputs, grad_outputs), None]
        return tuple(map(grads.__getitem__, positions))

    class CompiledFunction(torch.autograd.Function):
        """The compiled forward and backward as one autograd op."""

        @staticmethod
        def forward(ctx: Any, *inputs: Any) -> tuple[Any, ...]:  # type: ignore[override]
            """Run the compiled forward; keep the saved values for the backward."""
            # Kept for a backward under create_graph=True, which replays the forward on them
            # (plain references, but copies of those the forward updates in place: no version
            # checks for a first-order backward that never reads them). Not under saved-tensor
            # hooks (activation checkpointing, offloading to the CPU): the hooks decide what stays
            # in memory.
            keep = saved_tensor_hooks(False) is None
            ctx.region_inputs = (higher.inputs_to_keep(inputs) if higher is not None else inputs) if keep else None
            results = compiled_forward(list(inputs)) if forward_boxed else compiled_forward(*inputs)
            saved = results[num_outputs:]
            plain = layout.plain
            if plain is None:
                plain = layout.plain = not mutated and all(isinstance(v, torch.Tensor) for v in saved)
            if plain:
                ctx.save_for_backward(*saved)
            else:
                _save_with_layout(ctx, saved, inputs, mutated)
            outputs = tuple(results[:num_outputs])
            # Autograd would fill a zero gradient for every output the loss does not reach, BatchNorm's
            # new running statistics included (ResNet-18: 43 fill kernels per step), and the backward
            # would multiply them by saved values (0 * inf is NaN): the backward takes the
            # differentiable outputs that get none as structural zeros (`absent_tangents`).
            ctx.set_materialize_grads(False)
            ctx.differentiable_metas = [(outputs[i].shape, outputs[i].dtype, outputs[i].device) for i in differentiable]
            if non_differentiable:
                ctx.mark_non_differentiable(
                    *(outputs[i] for i in non_differentiable if isinstance(outputs[i], torch.Tensor))
                )
            return outputs

        @staticmethod
        def backward(ctx: Any, *grad_outputs: Any) -> tuple[Any, ...]:  # type: ignore[override]
            """Run the compiled backward on the saved values and the tangents (differentiably
            when grad mode is on, i.e. under create_graph=True)."""
            if autocast_enabled():  # see Region.__call__: the backward graph holds its casts
                with torch._C._DisableAutocast():
                    if torch.is_grad_enabled():
                        return run_backward_with_history(ctx, grad_outputs)
                    return run_backward(ctx, *grad_outputs)
            if torch.is_grad_enabled():
                return run_backward_with_history(ctx, grad_outputs)
            return run_backward(ctx, *grad_outputs)

    return CompiledFunction


@dataclasses.dataclass
class Region:
    """One compiled graph behind the user's calling convention (flat inputs, flat outputs)."""

    graph: FunctionalGraph
    compiled: CompiledTraining | CompiledInference
    # Inputs whose elements repeat (an expanded tensor passed in), with those dims: the graph takes
    # their distinct elements (`tracing/overlap.py`), a view of the input narrowed here on each call.
    distinct_inputs: tuple[tuple[int, tuple[int, ...]], ...] = ()
    _simple_outputs: int | None = dataclasses.field(default=None, init=False, repr=False)
    _single: bool = dataclasses.field(default=False, init=False, repr=False)
    _flat_tuple: bool = dataclasses.field(default=False, init=False, repr=False)
    _write_back: WriteBack = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        # When every user output is a graph output in order, with no views (the common case),
        # `__call__` slices instead of building each output; -1 marks "build them".
        graph = self.graph
        compiled = self.compiled
        differentiable = compiled.differentiable_outputs if isinstance(compiled, CompiledTraining) else ()
        self._write_back = WriteBack(
            graph.mutated_inputs, [slot for slot in differentiable if slot < len(graph.mutated_inputs)]
        )
        simple = not graph.mutated_inputs and all(
            spec.kind == "graph" and spec.index == i and not spec.views for i, spec in enumerate(graph.outputs)
        )
        self._simple_outputs = len(graph.outputs) if simple else -1
        spec = graph.out_spec
        self._single = spec.is_leaf()
        self._flat_tuple = spec.type is tuple and all(spec.child(i).is_leaf() for i in range(spec.num_children))

    def unflatten(self, flat_outputs: Sequence[Any]) -> Any:
        """The user's output structure from the flat outputs (a leaf and a flat tuple are quick)."""
        if self._single:
            return flat_outputs[0]
        if self._flat_tuple:
            return tuple(flat_outputs)
        return pytree.tree_unflatten(list(flat_outputs), self.graph.out_spec)

    def __call__(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """Run on the flat inputs; mutate inputs as eager would; return the flat user outputs."""
        if self.distinct_inputs:
            inputs = list(inputs)
            for index, dims in self.distinct_inputs:
                inputs[index] = distinct_elements(inputs[index], dims)
        if autocast_enabled():
            # The graphs hold autocast's casts already (traced under it); running their ATen ops
            # under the caller's autocast would cast them again.
            with torch._C._DisableAutocast():
                results = self.compiled.run(inputs)
        else:
            results = self.compiled.run(inputs)
        simple = self._simple_outputs
        if simple is not None and simple >= 0:
            return results if len(results) == simple else results[:simple]
        num_mutations = len(self.graph.mutated_inputs)
        if num_mutations:
            self._write_back(inputs, results)
        graph_outputs = results[num_mutations : num_mutations + self.graph.num_graph_outputs]
        return [spec.build(inputs, graph_outputs) for spec in self.graph.outputs]


@dataclasses.dataclass
class RaisingRegion:
    """A region eager would raise in on every call, with these inputs' layout: an in-place op on a
    tensor whose elements share memory (`tracing/overlap.py`). Raises eager's error, with the
    user's line."""

    op: str
    user_location: str | None

    def __call__(self, inputs: Sequence[Any]) -> Sequence[Any]:
        """Raise the error eager raises."""
        raise OverlappingWriteError(self.op, self.user_location)

    def unflatten(self, flat_outputs: Sequence[Any]) -> Any:
        """Never reached (the call raises)."""
        return flat_outputs
