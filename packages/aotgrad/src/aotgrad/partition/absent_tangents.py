"""A backward graph for calls where some tangents are absent: they are structural zeros, not zeros.

Autograd gives a compiled region's backward no gradient (None) for an output the loss never
reached. Eager autograd never runs the backward of such an output, and an input reached only
through it gets no gradient at all (None). Filling zeros into the general backward graph is not
the same: a zero times a saved infinity is NaN (``y * inf`` saves ``inf``), and the NaN lands in
the real gradients. `without_absent_tangents` instead derives, from the backward graph, the graph
in which those tangents are zeros known while compiling, propagated through it:

* a product, a view, a cast, a reduction, a gather of a zero is zero (`mul(0, inf)` is never
  computed); so is the result of a placement op (``where``, ``slice_scatter``, ``index_put``...)
  whose every value operand is zero or a zero constant (the ``0`` of ``where(x <= 0, 0, grad)``),
  and that of a ``*_backward`` op whose every gradient argument (``grad*`` in its schema) is zero;
* a sum with a zero term is its other term (``a + 0`` is ``a``, ``0 - b`` is ``-b``); a sum of zeros
  is zero;
* an input gradient that is zero is returned as None, as eager returns none.

Every other op reading a zero (a ``cat`` of a zero and a gradient, as ``chunk``'s backward makes) gets
real zeros for it, as eager's own formulas fill zeros there: a ``full`` of the value's static
shape, or at symbolic sizes ``zeros_like`` of the value computed from the absent tangents, which
that graph then takes, given as zeros (only such a ``zeros_like`` reads them).

A gradient is linear in the tangents, so a value computed from zeros only is zero: the rules only
say which ops that holds for structurally (the op lists below), and anything else gets real zeros.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from collections.abc import Callable, Sequence
from typing import Any

import sympy
import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_symbols

from aotgrad.partition.split import bound_symbols
from aotgrad.tracing.graph_passes import (
    eliminate_dead_code,
    is_random,
    is_runtime_assert,
    output_values,
    placeholders,
)

__all__ = ["AbsentTangentGraph", "without_absent_tangents"]

aten = torch.ops.aten
prims = torch.ops.prims


@dataclasses.dataclass(frozen=True)
class AbsentTangentGraph:
    """The backward graph for one pattern of absent tangents.

    Attributes:
        gm: ``(*saved values, *tangents at fed_tangents) -> (*gradients)``, one gradient per input of
            the backward it was derived from, None where it is zero; None when every gradient is.
        fed_tangents: the tangents (positions among the backward's tangents) the graph takes, in
            order: the present ones, and absent ones it reads as zeros (see the module docstring).
    """

    gm: torch.fx.GraphModule | None
    fed_tangents: tuple[int, ...]


# --- what each op does with a zero operand -------------------------------------------------------

ZERO = "zero"
"""A rule's answer: the node is a structural zero."""

COPY = "copy"
"""A rule's answer: copy the node, giving it real zeros for its zero operands."""


@dataclasses.dataclass(frozen=True)
class Same:
    """A rule's answer: the node's value is `node`'s (``a + 0``), negated when `negated` (``0 - b``)."""

    node: torch.fx.Node
    negated: bool = False


Decision = str | Same
ZeroTest = Callable[[Any], bool]
Rule = Callable[[torch.fx.Node, ZeroTest, ZeroTest], Decision]
"""``(node, is_absent, is_zero_constant) -> Decision``; `is_absent` tells the zeros that come from absent
tangents, `is_zero_constant` the zero constants of the graph (fillers, such as ``where``'s 0)."""

ZERO_RULES: dict[Any, Rule] = {}
"""Per op (an `OpOverloadPacket`, or `operator.getitem`), what a zero operand makes of the node."""


def _rule(*ops: Any) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        for op in ops:
            ZERO_RULES[op] = rule
        return rule

    return register


# f(z, ...) is zero when z is: views, casts, copies, reductions, gathers, linear maps of one tensor.
_LINEAR_IN_FIRST = (
    aten.alias, aten.clone, aten.contiguous, aten._to_copy, aten.to, aten.lift_fresh_copy, aten.detach,
    aten.view, aten._unsafe_view, aten.reshape, aten._reshape_alias, aten.expand, aten.expand_as,
    aten.permute, aten.transpose, aten.t, aten.unsqueeze, aten.squeeze, aten.slice, aten.select,
    aten.narrow, aten.as_strided, aten.unfold, aten.diagonal, aten.view_as_real, aten.view_as_complex,
    aten.real, aten.imag, aten.conj, aten._conj, aten.conj_physical, aten.resolve_conj, aten.resolve_neg,
    aten._neg_view, aten.view_copy, aten.expand_copy, aten.permute_copy, aten.t_copy, aten.transpose_copy,
    aten.unsqueeze_copy, aten.squeeze_copy, aten.slice_copy, aten.select_copy, aten.alias_copy,
    aten.split, aten.split_with_sizes, aten.unbind, aten.chunk, aten.tensor_split, aten.unsafe_split,
    aten.neg, aten.sum, aten.mean, aten.nansum, aten.cumsum, aten.flip, aten.roll, aten.rot90,
    aten.repeat, aten.tile, aten.index_select, aten.gather, aten.index, aten._unsafe_index, aten.take,
    aten.tril, aten.triu, aten.diag, aten.diag_embed, aten.trace, aten.narrow_copy,
    aten.pixel_shuffle, aten.pixel_unshuffle, aten.channel_shuffle, aten.im2col, aten.col2im,
    aten.avg_pool1d, aten.avg_pool2d, aten.avg_pool3d, aten._adaptive_avg_pool2d, aten._adaptive_avg_pool3d,
    aten.upsample_nearest1d, aten.upsample_nearest2d, aten.upsample_nearest3d, aten.upsample_linear1d,
    aten.upsample_bilinear2d, aten.upsample_bicubic2d, aten.upsample_trilinear3d,
    aten._upsample_nearest_exact1d, aten._upsample_nearest_exact2d, aten._upsample_nearest_exact3d,
    aten.reflection_pad1d, aten.reflection_pad2d, aten.reflection_pad3d,
    aten.replication_pad1d, aten.replication_pad2d, aten.replication_pad3d,
    aten._fft_r2c, aten._fft_c2r, aten._fft_c2c, aten.zeros_like,
    prims.convert_element_type, prims.broadcast_in_dim, prims.view_of, prims.squeeze, prims.transpose,
    prims.collapse_view, prims.split_dim, prims.reshape, prims.sum, prims.neg,
)


@_rule(*_LINEAR_IN_FIRST, operator.getitem)
def _linear_in_first(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    return ZERO if absent(node.args[0]) else COPY


@_rule(aten.mul, aten.mm, aten.bmm, aten.matmul, aten.dot, aten.vdot, aten.mv, aten.outer, aten.ger,
       aten.einsum, prims.mul)
def _product(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    operands = node.args[1] if node.target is aten.einsum.default else node.args
    return ZERO if any(absent(a) for a in _flat(operands)) else COPY


@_rule(aten.div, prims.div)
def _quotient(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    # 0 / b is zero; a / 0 is not a gradient's formula (real zeros, as eager would have them).
    return ZERO if absent(node.args[0]) and not any(absent(a) for a in _flat(node.args[1:])) else COPY


@_rule(aten.addmm, aten.baddbmm, aten.addbmm, aten.addmv, aten.addr, aten.addcmul)
def _product_plus(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    """``beta * self + alpha * (m1 @ m2)``: zero when a factor is and the added tensor is zero too."""
    added = node.args[0]
    added_zero = absent(added) or zero(added) or node.kwargs.get("beta", 1) == 0
    return ZERO if added_zero and any(absent(a) for a in node.args[1:3]) else COPY


@_rule(aten.convolution)
def _convolution(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    """``convolution(input, weight, bias)``: zero when the input or weight is and the bias is None or zero."""
    bias = _argument(node, 2, "bias")
    bias_zero = bias is None or absent(bias) or zero(bias)
    return ZERO if bias_zero and any(absent(a) for a in node.args[:2]) else COPY


@_rule(aten.masked_fill, aten.constant_pad_nd, aten.fill, aten.full_like, aten.index_fill, aten._unsafe_masked_index)
def _filled_with(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    """A zero tensor with some places (or all) set to a value: zero when the value is."""
    position, name = {
        aten.masked_fill: (2, "value"), aten.constant_pad_nd: (2, "value"), aten.fill: (1, "value"),
        aten.full_like: (1, "fill_value"), aten.index_fill: (3, "value"), aten._unsafe_masked_index: (3, "fill"),
    }[node.target.overloadpacket]  # type: ignore[union-attr]
    value = _argument(node, position, name, default=0)
    return ZERO if absent(node.args[0]) and (absent(value) or zero(value)) else COPY


# Placement ops: the result holds only their value operands' elements (and zeros); the positions
# of those operands (the others are indices, masks, conditions).
_PLACEMENTS: dict[Any, tuple[int, ...]] = {
    aten.where: (1, 2), prims.where: (1, 2), aten.complex: (0, 1),
    aten.slice_scatter: (0, 1), aten.select_scatter: (0, 1), aten.diagonal_scatter: (0, 1),
    aten.as_strided_scatter: (0, 1), aten.index_put: (0, 2), aten._unsafe_index_put: (0, 2),
    aten.index_add: (0, 3), aten.index_copy: (0, 3), aten.scatter: (0, 3), aten.scatter_add: (0, 3),
    aten.scatter_reduce: (0, 3), aten.masked_scatter: (0, 2), aten._unsafe_masked_index_put_accumulate: (0, 3),
    aten.copy: (1,),
}


@_rule(*_PLACEMENTS)
def _placement(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    """Zero when each value operand is zero or a zero constant, one of them from an absent tangent."""
    values = [node.args[i] if i < len(node.args) else 0 for i in _PLACEMENTS[node.target.overloadpacket]]  # type: ignore[union-attr]
    if any(absent(v) for v in values) and all(absent(v) or zero(v) for v in values):
        return ZERO
    return COPY


@_rule(aten.add, aten.sub, prims.add, prims.sub)
def _sum(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    """``a + 0`` is ``a``, ``0 - b`` is ``-b``, ``0 + 0`` is zero (where the shapes and dtypes agree)."""
    a, b = node.args[0], node.args[1]
    if absent(a) and (absent(b) or (not isinstance(b, torch.fx.Node) and b == 0)):
        return ZERO
    subtract = node.target.overloadpacket in (aten.sub, prims.sub)  # type: ignore[union-attr]
    if absent(b) and isinstance(a, torch.fx.Node) and _same_kind(a, node):
        return Same(a)
    alpha = _argument(node, 2, "alpha", default=1)
    if absent(a) and isinstance(b, torch.fx.Node) and alpha == 1 and _same_kind(b, node):
        return Same(b, negated=subtract)
    return COPY


@_rule(aten.cat, aten.stack, prims.cat)
def _concatenation(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    parts = list(node.args[0])  # type: ignore[arg-type]
    return ZERO if parts and all(absent(p) for p in parts) else COPY


def _backward_op(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    """A ``*_backward`` op maps its gradient arguments (``grad*`` in its schema) linearly: zero when
    they all are (or are None), and only they read a zero."""
    schema = node.target._schema  # type: ignore[union-attr]
    grads: list[Any] = []
    others: list[Any] = []
    for index, argument in enumerate(schema.arguments):
        value = node.args[index] if index < len(node.args) else node.kwargs.get(argument.name)
        (grads if argument.name.startswith("grad") else others).append(value)
    if any(absent(v) for v in _flat(others)) or not any(absent(v) for v in _flat(grads)):
        return COPY
    return ZERO if all(v is None or absent(v) or zero(v) for v in grads) else COPY


def decide(node: torch.fx.Node, absent: ZeroTest, zero: ZeroTest) -> Decision:
    """What a node reading a zero from an absent tangent becomes (`ZERO`, `Same`, or `COPY`)."""
    target = node.target
    packet = getattr(target, "overloadpacket", target)
    rule = ZERO_RULES.get(packet)
    if rule is None and isinstance(target, torch._ops.OpOverload) and "backward" in target._schema.name:
        rule = _backward_op
    if rule is None or not _tensor_valued(node):
        return COPY
    return rule(node, absent, zero)


# Zero constants: `full(shape, 0)`, `zeros`, `scalar_tensor(0)` and views of them (fillers).
_ZERO_FACTORIES: dict[Any, tuple[int, str]] = {
    aten.full.default: (1, "fill_value"), aten.scalar_tensor.default: (0, "s"), aten.full_like.default: (1, "fill_value"),
    aten.new_full.default: (2, "fill_value"), aten.fill.Scalar: (1, "value"),
}
_ZEROS = frozenset({aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default})


def is_zero_constant(value: Any) -> bool:
    """Whether `value` (a node's argument) is a number 0 or a zero tensor the graph makes itself."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == 0
    if not isinstance(value, torch.fx.Node) or value.op != "call_function":
        return False
    if value.target in _ZEROS:
        return True
    if value.target in _ZERO_FACTORIES:
        position, name = _ZERO_FACTORIES[value.target]
        fill = _argument(value, position, name)
        return isinstance(fill, (int, float)) and not isinstance(fill, bool) and fill == 0
    packet = getattr(value.target, "overloadpacket", None)
    return packet in _LINEAR_IN_FIRST and bool(value.args) and is_zero_constant(value.args[0])


# --- the derivation ------------------------------------------------------------------------------


def without_absent_tangents(backward: torch.fx.GraphModule, num_saved: int, absent: Sequence[bool]) -> AbsentTangentGraph:
    """The backward graph with the tangents marked in `absent` as structural zeros (see the module
    docstring). `backward` maps ``(*saved values, *tangents)`` (`num_saved` of them saved) to the
    gradients; it is not changed."""
    graph = backward.graph
    tangents = placeholders(graph)[num_saved:]
    assert len(tangents) == len(absent), "one flag per tangent"
    zeros, decisions = _propagate(graph, {t for t, gone in zip(tangents, absent) if gone})
    outputs = output_values(graph)
    if all(o is None or (isinstance(o, torch.fx.Node) and o in zeros) for o in outputs):
        return AbsentTangentGraph(None, ())
    live, fed = _live_and_fed(graph, tangents, zeros, decisions, absent)
    built = _Builder(graph, num_saved, zeros, decisions, live, {tangents[i] for i in fed}).build()
    gm = torch.fx.GraphModule(backward, built)
    gm.meta.update(backward.meta)
    return AbsentTangentGraph(gm, fed)


def _propagate(graph: torch.fx.Graph, absent: set[torch.fx.Node]) -> tuple[set[torch.fx.Node], dict[torch.fx.Node, Decision]]:
    """The nodes that are zero, given the absent tangents, and what each other node reading one becomes."""
    zeros = set(absent)
    decisions: dict[torch.fx.Node, Decision] = {}

    def is_absent(value: Any) -> bool:
        return isinstance(value, torch.fx.Node) and value in zeros

    for node in graph.nodes:
        if node.op != "call_function" or not any(a in zeros for a in node.all_input_nodes):
            continue
        decision = decide(node, is_absent, is_zero_constant)
        if decision == ZERO:
            zeros.add(node)
        else:
            decisions[node] = decision
    return zeros, decisions


def _live_and_fed(
    graph: torch.fx.Graph,
    tangents: Sequence[torch.fx.Node],
    zeros: set[torch.fx.Node],
    decisions: dict[torch.fx.Node, Decision],
    absent: Sequence[bool],
) -> tuple[set[torch.fx.Node], tuple[int, ...]]:
    """The nodes the nonzero gradients (and the graph's checks) still need, and the tangents the graph
    takes: the present ones, and the absent ones it reads as zeros: those a zero of symbolic size is
    computed from (`_Builder.real_zero`), and those whose sizes alone bind a size symbol it uses."""
    fed = {t for t, gone in zip(tangents, absent) if not gone}
    live: set[torch.fx.Node] = set()
    stack = [o for o in output_values(graph) if isinstance(o, torch.fx.Node) and o not in zeros]
    stack += [n for n in graph.nodes if _kept_for_effect(n) and n not in zeros]
    while stack:
        node = stack.pop()
        if node in live:
            continue
        live.add(node)
        decision = decisions.get(node)
        if isinstance(decision, Same):
            stack.append(decision.node)
            continue
        for operand in node.all_input_nodes:
            if operand not in zeros:
                stack.append(operand)
            elif _static_shape(operand) is None:  # computed as the backward does, then zeros_like
                chain = _ancestors(operand, zeros)
                live |= chain
                fed |= {t for t in tangents if t in chain}
    used = set().union(*(_symbols(n.meta.get("val")) for n in live))
    inputs = [n for n in placeholders(graph) if n not in tangents or n in fed]
    unbound = used - bound_symbols(n.meta.get("val") for n in inputs)
    unbound &= bound_symbols(n.meta.get("val") for n in placeholders(graph))  # not a symbol a node defines
    for tangent in tangents:
        binds = bound_symbols([tangent.meta.get("val")]) & unbound
        if binds:
            fed.add(tangent)
            unbound -= binds
    return live, tuple(i for i, t in enumerate(tangents) if t in fed)


def _kept_for_effect(node: torch.fx.Node) -> bool:
    """Whether the node runs for its effect (a runtime check, a random op, a mutation), used or not."""
    if node.op != "call_function":
        return False
    target = node.target
    mutable = isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable
    return mutable or is_random(node) or is_runtime_assert(node)


class _Builder:
    """Copies the backward graph without its zeros (see `without_absent_tangents`)."""

    def __init__(
        self,
        source: torch.fx.Graph,
        num_saved: int,
        zeros: set[torch.fx.Node],
        decisions: dict[torch.fx.Node, Decision],
        live: set[torch.fx.Node],
        fed: set[torch.fx.Node],
    ) -> None:
        self.source = source
        self.num_saved = num_saved
        self.zeros = zeros
        self.decisions = decisions
        self.live = live
        self.fed = fed
        self.graph = torch.fx.Graph()
        self.env: dict[torch.fx.Node, torch.fx.Node] = {}
        self.original: dict[torch.fx.Node, torch.fx.Node] = {}  # zeros computed as the backward did
        self.real: dict[torch.fx.Node, torch.fx.Node] = {}  # zeros made real

    def build(self) -> torch.fx.Graph:
        inputs = placeholders(self.source)
        for index, node in enumerate(inputs):
            if index < self.num_saved or node in self.fed:
                self.env[node] = self.graph.placeholder(node.name)
                self.env[node].meta = dict(node.meta)
        for node in self.source.nodes:
            if node.op in ("placeholder", "output") or node in self.zeros or node not in self.live:
                continue
            decision = self.decisions.get(node, COPY)
            if isinstance(decision, Same):
                self.env[node] = self._negated(decision.node) if decision.negated else self.env[decision.node]
            else:
                self.env[node] = self.graph.node_copy(node, self._argument)
        results = tuple(None if o is None or o in self.zeros else self.env[o] for o in output_values(self.source))
        self.graph.output(results)
        eliminate_dead_code(self.graph)
        self.graph.lint()
        return self.graph

    def _argument(self, node: torch.fx.Node) -> torch.fx.Node:
        return self.real_zero(node) if node in self.zeros else self.env[node]

    def _negated(self, node: torch.fx.Node) -> torch.fx.Node:
        negated = self.graph.call_function(aten.neg.default, (self.env[node],))
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            with _fake_mode_of(val):
                negated.meta["val"] = torch.neg(val)
        return negated

    def real_zero(self, node: torch.fx.Node) -> torch.fx.Node:
        """Real zeros for the zero `node`: a ``full`` of its static shape, a fed tangent as it is,
        else ``zeros_like`` of it computed from the fed (zero) tangents."""
        if node in self.real:
            return self.real[node]
        if node in self.fed:  # an absent tangent given as zeros
            made = self.env[node]
        elif (shape := _static_shape(node)) is not None:
            val = node.meta["val"]
            made = self.graph.call_function(
                aten.full.default, (list(shape), 0),
                {"dtype": val.dtype, "layout": torch.strided, "device": val.device, "pin_memory": False},
            )
            with _fake_mode_of(val):
                made.meta["val"] = torch.zeros(shape, dtype=val.dtype, device=val.device)
        else:  # only its shape is read: the values computed (NaN, maybe) are not
            made = self.graph.call_function(aten.zeros_like.default, (self._as_computed(node),))
            with _fake_mode_of(node.meta["val"]):
                made.meta["val"] = torch.zeros_like(node.meta["val"])
        self.real[node] = made
        return made

    def _as_computed(self, node: torch.fx.Node) -> torch.fx.Node:
        """`node` computed as the backward computes it, from the fed tangents (zeros)."""
        if node not in self.zeros:
            return self.env[node]
        if node in self.fed:
            return self.env[node]
        if node not in self.original:
            self.original[node] = self.graph.node_copy(node, self._as_computed)
        return self.original[node]


# --- helpers -------------------------------------------------------------------------------------


def _flat(values: Any) -> list[Any]:
    if isinstance(values, (list, tuple)):
        return [v for item in values for v in _flat(item)]
    return [values]


def _argument(node: torch.fx.Node, position: int, name: str, default: Any = None) -> Any:
    if position < len(node.args):
        return node.args[position]
    return node.kwargs.get(name, default)


def _tensor_valued(node: torch.fx.Node) -> bool:
    """Whether the node's value is a tensor or a tuple of tensors (and Nones)."""
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)):
        return all(v is None or isinstance(v, torch.Tensor) for v in val)
    return isinstance(val, torch.Tensor)


def _same_kind(a: torch.fx.Node, b: torch.fx.Node) -> bool:
    """Whether the two nodes' values have the same shape, dtype and device."""
    x, y = a.meta.get("val"), b.meta.get("val")
    if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)):
        return False
    if x.dtype != y.dtype or x.device != y.device or x.dim() != y.dim():
        return False
    return all(_equal_sizes(m, n) for m, n in zip(x.shape, y.shape))


def _equal_sizes(m: Any, n: Any) -> bool:
    if isinstance(m, int) and isinstance(n, int):
        return m == n
    m_expr = m.node.expr if isinstance(m, torch.SymInt) else sympy.Integer(m)
    n_expr = n.node.expr if isinstance(n, torch.SymInt) else sympy.Integer(n)
    return bool(sympy.expand(m_expr - n_expr) == 0)


def _static_shape(node: torch.fx.Node) -> tuple[int, ...] | None:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and all(isinstance(n, int) for n in val.shape):
        return tuple(int(n) for n in val.shape)
    return None


def _symbols(val: Any) -> set[sympy.Symbol]:
    values = val if isinstance(val, (tuple, list)) else [val]
    found: set[sympy.Symbol] = set()
    for value in values:
        if isinstance(value, (torch.Tensor, torch.SymInt)):
            found |= {s for s in free_symbols(value) if isinstance(s, sympy.Symbol)}
    return found


def _ancestors(node: torch.fx.Node, within: set[torch.fx.Node]) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current in seen or current not in within:
            continue
        seen.add(current)
        stack.extend(current.all_input_nodes)
    return seen


def _fake_mode_of(val: torch.Tensor) -> contextlib.AbstractContextManager[Any]:
    """The fake mode `val` belongs to (to make the meta values of new nodes), or no mode."""
    mode = getattr(val, "fake_mode", None)
    return mode if mode is not None else contextlib.nullcontext()
