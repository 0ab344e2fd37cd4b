"""Which joint-graph nodes the min-cut partitioner may recompute in the backward, and their sizes.

Cheap ops (pointwise, views, broadcasts, constants, casts) may be recomputed; everything else
(matmul, convolution, reductions, normalizations, random ops, gathers and scatters) is computed
once in the forward and saved when the backward needs it.

One exception among the casts: a cast of a graph input (a parameter) that `saves_input_cast`
picks is saved, not recomputed; see its docstring for the rule, decided by bytes moved.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from aotgrad.tracing.graph_passes import is_random

aten = torch.ops.aten

# Not tagged pointwise and not views, yet cheap to recompute (memory movement or constants).
CHEAP_OPS: frozenset[Any] = frozenset(
    {
        aten.expand.default,
        aten.clone.default,
        aten._to_copy.default,
        aten.copy.default,
        aten.full.default,
        aten.full_like.default,
        aten.zeros.default,
        aten.zeros_like.default,
        aten.ones.default,
        aten.ones_like.default,
        aten.scalar_tensor.default,
        aten.empty.memory_format,
        aten.empty_like.default,
        aten.empty_strided.default,
        aten.where.self,
        aten.cat.default,
        aten.constant_pad_nd.default,
        aten.squeeze.dims,
        aten.unsqueeze.default,
        aten.view.default,
        aten._unsafe_view.default,
        aten.permute.default,
        aten.t.default,
        aten.transpose.int,
        aten.slice.Tensor,
        aten.select.int,
        aten.reshape.default,
        aten.lift_fresh_copy.default,
    }
)


def is_recomputable(node: torch.fx.Node) -> bool:
    """True when `node` may be recomputed in the backward instead of saved."""
    if node.op == "get_attr":
        return True  # a constant of the graph: the backward reads it as well
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload) or is_random(node):
        return False
    return target in CHEAP_OPS or target.is_view or torch.Tag.pointwise in target.tags


# Ops whose tensor operands a library kernel (BLAS, cuDNN, an attention kernel, ATen's embedding
# gradient) reads from memory: a cast feeding one cannot fuse into it and is materialized first.
LIBRARY_OPS: frozenset[Any] = frozenset(
    {
        aten.mm.default,
        aten.addmm.default,
        aten.bmm.default,
        aten.baddbmm.default,
        aten.convolution.default,
        aten.convolution_backward.default,
        aten._scaled_dot_product_flash_attention.default,
        aten._scaled_dot_product_flash_attention_backward.default,
        aten._scaled_dot_product_efficient_attention.default,
        aten._scaled_dot_product_efficient_attention_backward.default,
        aten._scaled_dot_product_cudnn_attention.default,
        aten._scaled_dot_product_cudnn_attention_backward.default,
        aten._scaled_dot_product_flash_attention_for_cpu.default,
        aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
        aten.embedding_dense_backward.default,
    }
)

# Dtype casts: `_to_copy` (when it only changes the dtype) and the prims form of torch's decompositions.
_CASTS: frozenset[Any] = frozenset({aten._to_copy.default, torch.ops.prims.convert_element_type.default})


def _is_cast(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target not in _CASTS or not node.args:
        return False
    source, value = node.args[0], node.meta.get("val")
    if not isinstance(source, torch.fx.Node) or not isinstance(value, torch.Tensor):
        return False
    before = source.meta.get("val")
    return isinstance(before, torch.Tensor) and before.device == value.device and before.dtype != value.dtype


def _is_view(node: torch.fx.Node) -> bool:
    return (
        node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and node.target.is_view
    )


def _view_source(node: torch.fx.Node) -> torch.fx.Node:
    """The tensor `node` is a chain of views of (`node` itself when it is no view)."""
    while _is_view(node) and node.args and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node


def _consumers(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The users of `node`, looking through views of it (a transposed weight feeding a matmul)."""
    found: list[torch.fx.Node] = []
    stack = list(node.users)
    while stack:
        user = stack.pop()
        if _is_view(user):
            stack.extend(user.users)
        elif user.op != "output":
            found.append(user)
    return found


def saves_input_cast(node: torch.fx.Node, inputs: set[torch.fx.Node], backward: set[torch.fx.Node]) -> bool:
    """True when `node`, a dtype cast of a graph input (through views), should be saved for the
    backward instead of recomputed there (`min_cut` then never recomputes it).

    The min cut counts memory only, and saving an input is nearly free (the caller holds it), so
    without this rule every cast of a parameter is recomputed: under autocast each fp32 weight is
    read again (4 bytes an element) and written as bf16 (2) before the backward's GEMM reads it (2),
    where the forward had the bf16 copy in memory already. The rule compares the bytes the backward
    pass moves either way, with `i` the input's bytes and `c` the cast's:

    * recompute: read the input (`i`), plus write and read the cast (`2c`) when a backward consumer
      cannot fuse the cast (a GEMM, convolution or attention operand: `LIBRARY_OPS`);
    * save: read the saved cast (`c`), plus the forward's write of it (`c`) when no forward
      consumer already materializes it (all of them fuse it).

    The cast is saved when saving moves fewer bytes. So a downcast feeding a GEMM in the forward is
    always saved (`c < i + 2c`), as is one feeding a GEMM in the backward; a downcast fused into
    pointwise consumers on both sides is saved only when `2c < i` (fp32 to fp8), and an upcast only
    when a GEMM reads it on both sides. A cast the forward does not compute (no forward consumer) is
    left to recompute. The memory this holds is the narrow copies of the weights, which eager
    autograd under autocast holds as well (its matmuls save their bf16 operands), and it does not
    grow with the batch. Inference graphs are not partitioned and keep fusing their casts.

    Args:
        node: a node of a joint graph.
        inputs: the joint graph's primal placeholders.
        backward: its nodes that depend on the tangents (the backward pass).
    """
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node) or not _is_cast(node) or _view_source(source) not in inputs:
        return False
    cast_bytes, input_bytes = node_bytes(node), node_bytes(source)
    if cast_bytes is None or input_bytes is None:
        return False
    consumers = _consumers(node)
    forward_users = [u for u in consumers if u not in backward]
    backward_users = [u for u in consumers if u in backward]
    if not forward_users or not backward_users:
        return False
    recompute = input_bytes + (2 * cast_bytes if any(u.target in LIBRARY_OPS for u in backward_users) else 0)
    save = cast_bytes + (0 if any(u.target in LIBRARY_OPS for u in forward_users) else cast_bytes)
    return save < recompute


def value_bytes(value: Any) -> int | None:
    """Bytes of a traced value (`node.meta["val"]`): a tensor's size, 8 for a number, None for others."""
    if isinstance(value, torch.Tensor):
        numel = value.numel()
        numel = (
            int(numel.node.hint) if isinstance(numel, torch.SymInt) and numel.node.hint is not None else numel
        )
        if free_unbacked_symbols(numel):
            return 1 << 20  # `nonzero`'s rows (int() of one raises GuardOnDataDependentSymNode)
        try:
            return int(numel) * value.element_size()
        except TypeError:
            return 1 << 20  # an unbacked symbolic size: call it a megabyte
    if isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return 8
    return None


def node_bytes(node: torch.fx.Node) -> int | None:
    """Bytes saving `node` would cost, or None when it cannot be saved (e.g. a tuple of results)."""
    return value_bytes(node.meta.get("val"))


MAX_RECOMPUTE_READS = 3
"""The most large saved tensors one recomputed value may be rebuilt from (see `wide_recomputes`)."""

_LARGE_SHARE = 4  # a frontier tensor counts as large at a quarter of the value's bytes or more
_MAX_FRONTIER = 64


def wide_recomputes(nodes: list[torch.fx.Node], leaves: set[torch.fx.Node]) -> set[torch.fx.Node]:
    """Recomputable forward nodes that must not be recomputed because rebuilding them in the backward
    would read more than `MAX_RECOMPUTE_READS` large saved tensors.

    The min cut counts only the bytes saved, so it rebuilds a residual stream
    (`h_k = h_{k-1} + attention_k + mlp_k`, each add a cheap op) from the embedding and every
    layer's projection output: layer k's backward then reads 2k + 1 tensors to recompute one,
    a traffic quadratic in the depth (an 8-layer LLaMA's last norm backward read 17 tensors and took
    4x its fused time). Walking the forward in order, each recomputable node's *frontier* is the
    set of non-recomputed values it would be rebuilt from (through recomputable inputs); a node
    whose frontier holds more than `MAX_RECOMPUTE_READS` tensors of at least a quarter of its own
    bytes (small ones, a norm's statistics or weight, do not count) is banned: it is computed in
    the forward and saved, and later nodes are rebuilt from it. The chain is cut every few adds.

    Args:
        nodes: the joint graph's forward nodes, in order.
        leaves: nodes never recomputed (primals and ops `is_recomputable` refuses).
    """
    banned: set[torch.fx.Node] = set()
    frontier: dict[torch.fx.Node, frozenset[torch.fx.Node]] = {}
    for node in nodes:
        if node in leaves or node.op != "call_function":
            frontier[node] = frozenset({node})
            continue
        parts: set[torch.fx.Node] = set()
        for source in node.all_input_nodes:
            parts |= frontier.get(source, frozenset({source}))
        own = node_bytes(node)
        large = [
            p for p in parts if own is None or (size := node_bytes(p)) is None or size * _LARGE_SHARE >= own
        ]
        if len(large) > MAX_RECOMPUTE_READS or len(parts) > _MAX_FRONTIER:
            banned.add(node)
            frontier[node] = frozenset({node})
        else:
            frontier[node] = frozenset(parts)
    return banned
