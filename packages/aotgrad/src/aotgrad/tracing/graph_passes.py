"""Small clean-ups on traced ATen graphs: drop no-op aliases and dead code, keep random ops and checks."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

aten = torch.ops.aten


# Checks a graph runs for their effect alone (`tracing/runtime_asserts.py`): never dead code.
RUNTIME_ASSERTS = frozenset({aten._assert_scalar.default, aten._assert_async.default, aten._assert_async.msg})


def is_runtime_assert(node: torch.fx.Node) -> bool:
    """True when the node checks a condition at run time (`aten._assert_scalar`): it has no users
    but must run, in the forward graph."""
    return node.op == "call_function" and node.target in RUNTIME_ASSERTS


def is_random(node: torch.fx.Node) -> bool:
    """True when the node calls a random ATen op (its result depends on the RNG state)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags


def remove_aliases(graph: torch.fx.Graph, *, detaches: bool = False) -> None:
    """Replace `aten.alias(x)` by `x`: in a functional graph an alias is the same value.

    With `detaches`, `aten.detach(x)` too: once a graph is differentiated it is an alias as well.
    """
    targets = {aten.alias.default, aten.detach.default} if detaches else {aten.alias.default}
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target in targets:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)


def eliminate_dead_code(graph: torch.fx.Graph) -> None:
    """Remove nodes nobody uses, except random ops (dropping one would shift eager's RNG stream)
    and runtime checks."""
    for node in reversed(list(graph.nodes)):
        if node.op in ("placeholder", "output") or node.users:
            continue
        if is_random(node) or is_runtime_assert(node):
            continue
        target = node.target
        if isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            continue
        graph.erase_node(node)


# Ops whose every call is a value of its own even with equal arguments: fresh uninitialized memory.
_FRESH_MEMORY = frozenset({
    aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
    aten.new_empty.default, aten.new_empty_strided.default,
})


_DATA_DEPENDENT_TAGS = frozenset({torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape})


class _NoKey(Exception):
    """An argument with no exact, hashable key: the node is left alone."""


def _argument_key(value: Any) -> Any:
    """A key equal for two arguments exactly when they are the same value of the same type (1, 1.0 and
    True differ; so do 0.0 and -0.0, which `==` and `hash` would merge)."""
    if isinstance(value, torch.fx.Node):
        return ("node", value)
    if value is None or isinstance(value, (bool, str, torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_argument_key(v) for v in value))
    raise _NoKey


def _viewed_chain(value: Any) -> list[torch.fx.Node]:
    """`value` and the nodes it is a view of, down to the one owning the memory (`getitem`s of a
    view op's tuple, as `split`'s, included)."""
    chain: list[torch.fx.Node] = []
    while isinstance(value, torch.fx.Node) and value.op == "call_function":
        chain.append(value)
        target = value.target
        if not (target is operator.getitem or (isinstance(target, torch._ops.OpOverload) and target.is_view)):
            break
        value = value.args[0]
    if isinstance(value, torch.fx.Node) and value.op != "call_function":
        chain.append(value)
    return chain


def merge_common_subexpressions(graph: torch.fx.Graph, *, distinct_outputs: int) -> int:
    """Replace each call that repeats an earlier one (same op, same arguments) by that one; returns
    how many went.

    Autocast casts an activation once per matmul reading it (a norm's output feeding the q, k and v
    projections: three equal `_to_copy` nodes), and each copy would be stored, and recomputed in the
    backward, on its own. Random ops, fresh memory, mutations, runtime checks and data-dependent results (each
    defines a size symbol of its own) are never merged.

    Args:
        graph: changed in place.
        distinct_outputs: how many of the graph's leading outputs reach the caller as tensors of
            their own memory (a forward's outputs: in eager each is a separate tensor). No two of
            them, nor the bases they are views of, become one node: the region would return one
            tensor twice (or two views of one), so writing into one output would change the other,
            and `mark_non_differentiable` on an output computed under `torch.no_grad()` would take
            the gradient from its equal twin computed with grad. (The gradients after them may
            merge: autograd copies a gradient it would share.)
    """
    # The nodes whose memory the caller gets (outputs and the bases they view); a node merged
    # into another passes that on.
    distinct = {n for v in output_values(graph)[:distinct_outputs] for n in _viewed_chain(v)}
    seen: dict[Any, torch.fx.Node] = {}
    merged = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or is_random(node) or is_runtime_assert(node) or node.target in _FRESH_MEMORY:
            continue
        if node.meta.get("unbacked_bindings"):
            continue  # it defines a data-dependent size or value (`item()`, `nonzero`) later nodes name
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            if target._schema.is_mutable or _DATA_DEPENDENT_TAGS.intersection(target.tags):
                continue
        elif target is not operator.getitem:
            continue
        try:
            key = (target, _argument_key(node.args), _argument_key(tuple(sorted(node.kwargs.items()))))
        except _NoKey:
            continue
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = node
            continue
        if node in distinct:
            if earlier in distinct:
                continue  # two outputs' memory, equal in value: the caller holds both
            distinct.add(earlier)
        node.replace_all_uses_with(earlier)
        graph.erase_node(node)
        merged += 1
    return merged


def clean(gm: torch.fx.GraphModule, *, forward_outputs: int | None = None) -> torch.fx.GraphModule:
    """Apply the clean-ups above, lint the graph and regenerate its code.

    Args:
        gm: the graph module, changed in place.
        forward_outputs: set for a joint graph (differentiated), the number of its leading outputs
            that are the forward's: detaches are no-ops now and go as well, and repeated calls are
            merged, keeping those outputs distinct tensors.
    """
    differentiated = forward_outputs is not None
    remove_aliases(gm.graph, detaches=differentiated)
    if forward_outputs is not None:
        # Not before: a forward graph is differentiated by replaying it, and one cast merged from
        # three would sum its three gradients in its own (half) dtype, where eager sums them in the
        # input's dtype. Inference graphs are merged where they are known to be final (compile.py).
        merge_common_subexpressions(gm.graph, distinct_outputs=forward_outputs)
    eliminate_dead_code(gm.graph)
    gm.graph.lint()
    gm.recompile()
    return gm


def views_as_reshapes(gm: torch.fx.GraphModule, *, recompile: bool = True) -> torch.fx.GraphModule:
    """Turn `aten.view` calls into `aten.reshape`, which re-decides view-or-copy when traced again.

    A trace records `view` where the strides it saw allowed one; traced again with other
    decompositions (e.g. of scaled-dot-product attention) an intermediate may have other strides,
    and a recorded `view` of it would fail. Where a view is possible `reshape` still is one, so
    aliasing (and thus mutation through views) is unchanged. Changes `gm` in place and returns it
    (with `recompile=False` its code is left stale, for a caller that only interprets its graph).
    """
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is aten.view.default:
            node.target = aten.reshape.default
    if recompile:
        gm.recompile()
    return gm


def output_node(graph: torch.fx.Graph) -> torch.fx.Node:
    """The graph's single `output` node."""
    node: torch.fx.Node
    for node in reversed(graph.nodes):
        if node.op == "output":
            return node
    raise ValueError("graph has no output node")


def output_values(graph: torch.fx.Graph) -> list[Any]:
    """The values the graph returns (its output node's tuple), as a list."""
    values = output_node(graph).args[0]
    assert isinstance(values, (tuple, list)), "aotgrad graphs return a tuple"
    return list(values)


def placeholders(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The graph's placeholder nodes, in order."""
    return [node for node in graph.nodes if node.op == "placeholder"]


def _physical_order(value: torch.Tensor) -> list[int] | None:
    """Dims from outermost to innermost in memory, when `value` is dense and not contiguous."""
    if value.is_contiguous() or value.numel() == 0:
        return None
    strides = [int(s) for s in value.stride()]
    order = sorted(range(value.dim()), key=lambda d: (-strides[d], d))
    expected = 1
    for d in reversed(order):
        if value.shape[d] != 1 and strides[d] != expected:
            return None  # overlapping or with gaps: no physical order to mirror
        expected *= value.shape[d]
    return order


def draw_random_in_memory_order(gm: torch.fx.GraphModule, *, recompile: bool = True) -> None:
    """Make `bernoulli(t)` on a non-contiguous `t` draw in `t`'s memory order, as eager's in-place
    `empty_like(x).bernoulli_(p)` does (functionalization's `bernoulli.p` allocates contiguously),
    so that the same seed gives eager's mask. Runs under the fake mode of the trace; with
    `recompile=False` the caller regenerates `gm`'s code after its own passes."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten.bernoulli.p:
            continue
        source = node.args[0]
        value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        order = _physical_order(value) if isinstance(value, torch.Tensor) else None
        if order is None:
            continue
        assert isinstance(value, torch.Tensor)
        shape = [int(value.shape[d]) for d in order]
        inverse = [order.index(d) for d in range(value.dim())]
        with gm.graph.inserting_before(node):
            base = gm.graph.call_function(
                aten.empty.memory_format, (shape,), {"dtype": value.dtype, "device": value.device}
            )
            drawn = gm.graph.call_function(aten.bernoulli.p, (base, *node.args[1:]), dict(node.kwargs))
            logical = gm.graph.call_function(aten.permute.default, (drawn, inverse))
        base.meta["val"] = torch.empty(shape, dtype=value.dtype, device=value.device)
        drawn.meta["val"] = torch.empty(shape, dtype=value.dtype, device=value.device)
        logical.meta["val"] = drawn.meta["val"].permute(inverse)
        node.replace_all_uses_with(logical)
        gm.graph.erase_node(node)
    eliminate_dead_code(gm.graph)
    if recompile:
        gm.recompile()


_ADDCMUL = (aten.addcmul.default, aten.addcmul_.default)


def truncate_integral_addcmul_values(gm: torch.fx.GraphModule) -> None:
    """`addcmul(x, a, b, value=v)` on integer tensors with a float `v` as eager computes it: eager's
    kernel converts `v` to the integer dtype (truncating: 0.5 -> 0, -1.7 -> -1), while torch's
    decomposition refuses a float `value` for integer tensors. A `v` outside the dtype's range is left
    for the decomposition to refuse (eager raises too). Changes `gm`'s graph in place."""
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _ADDCMUL:
            continue
        value = node.kwargs.get("value", node.args[3] if len(node.args) > 3 else 1)
        self_value = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
        if not isinstance(value, float) or not isinstance(self_value, torch.Tensor):
            continue
        dtype = self_value.dtype
        if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool or value != value:
            continue
        info = torch.iinfo(dtype)
        if abs(value) == float("inf") or not info.min <= int(value) <= info.max:
            continue
        if "value" in node.kwargs:
            node.kwargs = {**node.kwargs, "value": int(value)}
        else:
            node.args = (*node.args[:3], int(value), *node.args[4:])
