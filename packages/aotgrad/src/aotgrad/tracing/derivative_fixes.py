"""Rewrites of forward ops whose derivative formula in torch differs from eager's gradient.

The joint trace differentiates the functional forward. Functionalization replaces some in-place
ops by functional variants whose generated derivative formulas read an input where eager's in-place
op reads the value it wrote. Each rewrite here turns such an op into ops whose derivatives are
eager's, with the same forward values bit for bit.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

aten = torch.ops.aten

_RRELU_DEFAULTS = {"lower": 1.0 / 8.0, "upper": 1.0 / 3.0, "training": False, "generator": None}
# Eager's rrelu backward multiplies by the drawn slopes only when their range is wider than this
# (ATen's `rrelu_with_noise_backward`); otherwise it is leaky_relu's, which the formula gets right.
_RRELU_RANGE = 1e-6


def _bound_args(node: torch.fx.Node) -> dict[str, Any]:
    names = [a.name for a in node.target._schema.arguments]  # type: ignore[union-attr]
    bound: dict[str, Any] = dict(_RRELU_DEFAULTS)
    bound.update(zip(names, node.args))
    bound.update(node.kwargs)
    return bound


def rrelu_from_drawn_slopes(gm: torch.fx.GraphModule) -> None:
    """Rewrite training-mode `rrelu_with_noise_functional(x, noise, ...)` as the op on `x.detach()`
    (it only draws the slopes `noise_out`) and `x * noise_out`.

    The functional op's derivative reads `noise`, the buffer it was given, where eager's in-place
    `rrelu_with_noise` reads the slopes it drew into it: the compiled gradient came out zero. The
    kernel's output is `x * slope` with slope 1 where `x > 0`, so `x * noise_out` is the same value
    exactly, and its derivative is eager's. Changes `gm`'s graph in place (its code is left stale).
    """
    graph = gm.graph
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.rrelu_with_noise_functional.default:
            continue
        bound = _bound_args(node)
        if not bound["training"] or bound["upper"] - bound["lower"] <= _RRELU_RANGE:
            continue
        x = bound["self"]
        with graph.inserting_before(node):
            detached = graph.call_function(aten.detach.default, (x,))
            drawn = graph.call_function(node.target, (detached, *node.args[1:]), dict(node.kwargs))
            slopes = graph.call_function(operator.getitem, (drawn, 1))
            out = graph.call_function(aten.mul.Tensor, (x, slopes))
        detached.meta = dict(x.meta)
        drawn.meta = dict(node.meta)
        for user in list(node.users):
            assert user.target is operator.getitem, "a tuple-returning op is read through getitem"
            replacement = out if user.args[1] == 0 else slopes
            replacement.meta = dict(user.meta)
            user.replace_all_uses_with(replacement)
            graph.erase_node(user)
        if "val" not in slopes.meta:
            slopes.meta["val"] = node.meta["val"][1]
        if "val" not in out.meta:
            out.meta["val"] = node.meta["val"][0]
        graph.erase_node(node)
