"""Rewrites of an ATen graph that run before lowering; each returns a graph and leaves its argument alone.

* :func:`fuse_attention_pass`: attention written by hand (``softmax(q @ k.T * c) @ v`` on CPU)
  becomes one fused attention call (``lowering/attention.py``).
* :func:`fold_embedding_gradients_pass`: a tied embedding's gradient accumulates into the other
  one's with ``index_put`` (``lowering/accumulate.py``).

A pass returns its argument itself when the graph has nothing to rewrite; otherwise a rewritten
copy. The copy is made only when a node the rewrite starts from is there, and it is a lazily
recompiled ``GraphModule``: lowering reads its nodes and never runs its Python code, so none is
generated for it unless someone calls it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.fx
from torch.fx._lazy_graph_module import _LazyGraphModule

from inductor_ir.lowering.accumulate import fold_embedding_gradients
from inductor_ir.lowering.attention import fuse_attention

__all__ = ["fold_embedding_gradients_pass", "fuse_attention_pass"]

_aten = torch.ops.aten


def fuse_attention_pass(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with each hand-written attention fused into one call (see ``lowering/attention.py``).

    Returns:
        A rewritten copy of ``gm``, or ``gm`` itself when no attention matched.
    """
    # The pattern is on CPU, and its softmax has one user (besides reads of its sizes).
    starts = any(n.target is _aten._softmax.default and _on_cpu(n) and _tensor_users(n) == 1 for n in gm.graph.nodes)
    return _rewritten(gm, fuse_attention) if starts else gm


def fold_embedding_gradients_pass(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with ``add(g, embedding_dense_backward(...))`` folded into ``index_put(g, ..., accumulate=True)``
    (see ``lowering/accumulate.py``).

    Returns:
        A rewritten copy of ``gm``, or ``gm`` itself when there was nothing to fold.
    """
    starts = any(
        n.target is _aten.embedding_dense_backward.default
        and len(n.users) == 1
        and next(iter(n.users)).target is _aten.add.Tensor
        for n in gm.graph.nodes
    )
    return _rewritten(gm, fold_embedding_gradients) if starts else gm


def _on_cpu(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and value.device.type == "cpu"


_SIZE_OPS = (_aten.sym_size.int, _aten.sym_stride.int, _aten.sym_numel.default, _aten.sym_storage_offset.default)


def _tensor_users(node: torch.fx.Node) -> int:
    return sum(1 for user in node.users if user.target not in _SIZE_OPS)


def _rewritten(gm: torch.fx.GraphModule, rewrite: Callable[[torch.fx.GraphModule], int]) -> torch.fx.GraphModule:
    """``rewrite`` (an in-place rewrite returning how many places it changed) applied to a copy of
    ``gm``: the copy, or ``gm`` when the rewrite changed nothing. Node names, metadata (shared
    values) and attributes are those of ``gm``."""
    graph_copy = _LazyGraphModule(gm, copy.deepcopy(gm.graph))
    return graph_copy if rewrite(graph_copy) else gm
