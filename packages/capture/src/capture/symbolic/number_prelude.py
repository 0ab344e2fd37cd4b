"""Python arithmetic on numbers read as inputs: computed in Python on each call, as eager computes it, not by the backend.

A Python number read as a graph input (a varying int or float argument, a float crossing a graph break:
`run_time_values.py`) is ``.item()`` of a 0-d float64 (int64) input, and Python arithmetic on it (``lr / 3``,
``1 - 0.999 ** step``, ``max(n, 2)``) records nodes on those numbers. Left in the graph, a backend computes them its
own way (inside a float32 kernel, or with its constants printed to 15 digits), not as Python does. So:

* `NumberPrelude.render`: such a number leaving the region (returned, passed over a break) is that arithmetic as
  Python over the arguments (``(L[1] / 3)``), rebuilt by the entry after the graph, not a graph output;
* `NumberPrelude.hoist`: such a number a tensor op uses is computed by the entry from the arguments before the graph
  runs and passed as one more 0-d input, read with ``.item()`` where the arithmetic was; the arithmetic's nodes go.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from capture.sources import ExpressionSource, ScalarTensorSource

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph

_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
_DTYPES = {torch.SymInt: "torch.int64", torch.SymFloat: "torch.float64", torch.SymBool: "torch.bool"}


class NumberPrelude:
    """The nodes of a graph that compute Python numbers from number inputs alone, as Python over the arguments.

    `constant` names a Python object (a function such as ``operator.truediv``) in the entry's namespace.
    """

    def __init__(self, output: OutputGraph, constant: Callable[[Any], str]) -> None:
        self.output = output
        self.constant = constant
        self._text: dict[torch.fx.Node, str] = {}
        self._value: dict[torch.fx.Node, Any] = {}
        for graph_input in output.inputs:
            if not isinstance(graph_input.source, ScalarTensorSource):
                continue
            for user in graph_input.node.users:
                if user.op == "call_method" and user.target == "item" and len(user.args) == 1:
                    self._text[user] = graph_input.source.base.expr()
                    self._value[user] = graph_input.value.item()

    def render(self, node: torch.fx.Node) -> str | None:
        """`node`'s number as Python over the arguments; None when it is not computed from number inputs alone."""
        known = self._text.get(node)
        if known is not None:
            return known
        if node.op != "call_function" or node.kwargs or not callable(node.target) or \
                not isinstance(node.meta.get("example_value"), _SYM_TYPES):
            return None
        parts: list[str] = []
        values: list[Any] = []
        for arg in node.args:
            if isinstance(arg, torch.fx.Node):
                text = self.render(arg)
                if text is None:
                    return None
                parts.append(text)
                values.append(self._value[arg])
            elif isinstance(arg, (bool, int, float)):
                parts.append(repr(arg) if type(arg) is not float else self.constant(arg))
                values.append(arg)
            else:
                return None
        try:
            value = node.target(*values)
        except Exception:  # (ZeroDivisionError on this call): leave it to the graph
            return None
        self._value[node] = value
        self._text[node] = text = f"{self.constant(node.target)}({', '.join(parts)})"
        return text

    def hoist(self) -> None:
        """Compute the numbers tensor ops (and graph outputs) use in the entry, before the graph: new inputs."""
        graph = self.output.graph
        torch_name = self.output.guards.constant(torch)
        hoisted = 0
        for node in list(graph.nodes):
            if node in self._text and node.op == "call_method":
                continue  # an input's own `.item()`: the number as it is
            text = self.render(node)
            users = [user for user in node.users if self.render(user) is None]
            if text is None or not users:
                continue
            example = node.meta["example_value"]
            dtype = _DTYPES[next(t for t in _SYM_TYPES if isinstance(example, t))]
            tensor = torch.scalar_tensor(self._value[node], dtype=getattr(torch, dtype.split(".")[1]))
            self.output.keepalive.append(tensor)
            hoisted += 1
            source = ScalarTensorSource(ExpressionSource(text, f"number{hoisted}"), torch_name, dtype)
            holder = self.output.add_input(tensor, source)
            with graph.inserting_before(node):
                read = graph.call_method("item", (holder.node,))
            read.meta["example_value"] = example
            node.replace_all_uses_with(read, delete_user_cb=lambda user: user in users)
        for node in reversed(list(graph.nodes)):
            if not node.users and node.op in ("call_function", "call_method") and self.render(node) is not None:
                graph.erase_node(node)
