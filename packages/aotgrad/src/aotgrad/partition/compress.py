"""Store 0/1 masks between forward and backward as bools: 4x fewer bytes for a float32 mask, exact."""

from __future__ import annotations

import torch
import torch.fx

from aotgrad.tracing.graph_passes import output_node, output_values, placeholders

aten = torch.ops.aten

# Ops whose result holds only zeros and ones (a random mask), whatever its dtype.
MASK_OPS = frozenset({aten.bernoulli.p, aten.bernoulli.default})


def _is_float_mask(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return (
        node.op == "call_function"
        and node.target in MASK_OPS
        and isinstance(value, torch.Tensor)
        and value.is_floating_point()
    )


def save_masks_as_bool(
    forward: torch.fx.GraphModule, backward: torch.fx.GraphModule, num_fwd_outputs: int
) -> None:
    """Rewrite a partition in place so saved random masks cross as bool tensors.

    The forward casts each saved float mask to bool before returning it; the backward casts it
    back to the original dtype right after its placeholder.
    """
    outputs = output_values(forward.graph)
    backward_inputs = placeholders(backward.graph)
    changed = False
    for position, value in enumerate(outputs[num_fwd_outputs:]):
        if not isinstance(value, torch.fx.Node) or not _is_float_mask(value):
            continue
        dtype = value.meta["val"].dtype
        with forward.graph.inserting_before(output_node(forward.graph)):
            packed = forward.graph.call_function(aten._to_copy.default, (value,), {"dtype": torch.bool})
        packed.meta["val"] = value.meta["val"].to(torch.bool)
        outputs[num_fwd_outputs + position] = packed
        placeholder = backward_inputs[position]
        placeholder.meta["val"] = packed.meta["val"]
        with backward.graph.inserting_after(backward_inputs[-1]):
            unpacked = backward.graph.call_function(aten._to_copy.default, (placeholder,), {"dtype": dtype})
        unpacked.meta["val"] = value.meta["val"]
        placeholder.replace_all_uses_with(unpacked, delete_user_cb=lambda user: user is not unpacked)
        changed = True
    if changed:
        output_node(forward.graph).args = (tuple(outputs),)
        for gm in (forward, backward):
            gm.graph.lint()
            gm.recompile()
