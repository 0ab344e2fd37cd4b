"""Attribute reads on trackers (`owner.name`): stores made earlier in the region, tensors' special
attributes, and attributes capture cannot model (a break where they are used)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from capture.variables.autograd_calls import TensorRegisterHookVariable
from capture.variables.base import DeferredAttributeVariable, Unsupported, VariableTracker
from capture.variables.containers import DictVariable, ListVariable, TupleVariable
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


def get_attribute(tx: Tracer, owner: VariableTracker, name: str) -> VariableTracker:
    """`owner.name`, seeing attribute stores made earlier in the region."""
    pending = tx.output.side_effects.pending_attribute(owner, name)
    if pending is not None:
        return pending
    if isinstance(owner, TensorVariable):
        special = _tensor_attribute(tx, owner, name)
        if special is not None:
            return special
    try:
        return owner.getattr(tx, name)
    except Unsupported as error:
        if error.user_error or (owner.source is None and not _rebuildable(owner)):
            raise  # eager raises here (an AttributeError a try block may catch): so must the trace
        # Break where the attribute is used (a call, usually), which can be resumed.
        return DeferredAttributeVariable(owner, name, error)


def _tensor_attribute(tx: Tracer, tensor: TensorVariable, name: str) -> VariableTracker | None:
    """`tensor.register_hook`, and the AttributeError of a name no tensor has (None: the usual lookup)."""
    if name == "register_hook":
        return TensorRegisterHookVariable(tensor)
    if hasattr(torch.Tensor, name) or name.startswith("__"):
        return None
    real = _real_tensor(tx, tensor)
    if real is not None:
        if hasattr(real, name):
            return None  # an attribute the user set on this tensor object
        if tensor.source is not None:
            expr = tensor.source.expr()
            tx.output.guards.add("NO_ATTRIBUTE", tensor.source, f"not hasattr({expr}, {name!r})",
                                 f"{expr} has no attribute {name!r}")
    elif tensor.node.op in ("placeholder", "get_attr"):
        return None
    message = f"'{'Tensor' if real is None else type(real).__name__}' object has no attribute '{name}'"
    raise Unsupported(f"AttributeError: {message}", user_error=True, exception=AttributeError(message))


def _real_tensor(tx: Tracer, tensor: TensorVariable) -> torch.Tensor | None:
    """The real tensor behind a graph input or attribute (None for tensors the graph computes)."""
    for graph_input in tx.output.inputs:
        if graph_input.node is tensor.node:
            return graph_input.value
    if tensor.node.op == "get_attr":
        value = getattr(tx.output.root, str(tensor.node.target), None)
        return value if isinstance(value, torch.Tensor) else None
    return None


def _rebuildable(owner: VariableTracker) -> bool:
    return isinstance(owner, (TensorVariable, ListVariable, DictVariable, TupleVariable)) or owner.is_constant()
