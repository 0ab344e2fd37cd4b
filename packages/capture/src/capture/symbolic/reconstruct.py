"""Turning trackers back into Python: expressions of the generated entry function."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch.fx
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from capture.bytecode.codegen import invoke
from capture.variables.base import ConstantVariable, DeferredAttributeVariable, NullVariable, VariableTracker
from capture.variables.builtins import BuiltinVariable
from capture.variables.container_methods import ContainerMethodVariable
from capture.variables.containers import DictVariable, IteratorVariable, ListVariable, TupleVariable
from capture.variables.context_managers import GradModeRestorer, WithExitVariable
from capture.variables.functional import PartialVariable
from capture.variables.functions import (
    BoundMethodVariable,
    CellVariable,
    NestedFunctionVariable,
    RealCellVariable,
    UserFunctionVariable,
)
from capture.variables.model_output import ModelOutputVariable
from capture.variables.objects import (
    ConstantMethodVariable,
    NNModuleVariable,
    PythonObjectVariable,
    SkippedFunctionVariable,
    TorchFunctionVariable,
)
from capture.variables.rebuilding import CannotReconstruct, make_function, new_object
from capture.variables.sym_values import SYMBOLIC_NODE, SymNodeVariable
from capture.variables.tensor import TensorMethodVariable, TensorVariable
from capture.variables.user_objects import NewObjectVariable

_LITERAL_TYPES = (bool, int, str, type(None))


class Reconstructor:
    """Renders trackers as Python expressions; tensors made by the graph become `__o[i]`."""

    def __init__(self, namespace: dict[str, Any], graph_inputs: set[torch.fx.Node],
                 render_symbolic: Callable[[Any], str] | None = None) -> None:
        self.namespace = namespace
        self.graph_inputs = graph_inputs
        self.render_symbolic = render_symbolic  # a symbolic size as Python over the inputs' sizes
        # A number computed from number inputs alone as Python over the arguments (`number_prelude.py`).
        self.render_number: Callable[[torch.fx.Node], str | None] | None = None
        self.outputs: list[torch.fx.Node] = []
        self.prelude: list[str] = []
        self._constants: dict[int, str] = {}
        self._built: dict[int, str] = {}

    def _once(self, value: VariableTracker, build: str) -> str:
        """Mutable containers are built once, so every reference shares the same object."""
        name = f"__t{len(self._built)}"
        self._built[id(value)] = name
        self.prelude.append(f"{name} = {build}")
        return name

    def constant(self, value: Any) -> str:
        """A name bound to `value` in the entry's namespace."""
        if isinstance(value, _LITERAL_TYPES) and type(value) in _LITERAL_TYPES:
            return repr(value)
        key = id(value)
        name = self._constants.get(key)
        if name is None:
            name = f"_c{len(self.namespace)}"
            self.namespace[name] = value
            self._constants[key] = name
        return name

    def output_index(self, node: torch.fx.Node) -> int:
        """Index of `node` among the graph outputs (appended on first use)."""
        for index, known in enumerate(self.outputs):
            if known is node:
                return index
        self.outputs.append(node)
        return len(self.outputs) - 1

    def expr(self, value: VariableTracker, *, wrap_callee: str | None = None) -> str:
        """The expression that rebuilds `value` at run time."""
        if isinstance(value, TensorVariable):
            if value.source is not None and (value.node in self.graph_inputs or value.node.op == "get_attr"):
                return value.source.expr()
            return f"__o[{self.output_index(value.node)}]"
        if isinstance(value, ConstantVariable):
            return self.constant(value.value)
        if isinstance(value, SymNodeVariable):
            # A number read as an input (`run_time_values.py`), or Python arithmetic on such numbers, done in Python
            # as eager does (`number_prelude.py`): computed before the region's mutations are replayed, which may
            # rebind the cell or attribute it is read from (``n = int(n / 2)`` of a cell ``n``).
            number = value.source.expr() if value.source is not None else \
                self.render_number(value.node) if self.render_number is not None else None
            if number is not None:
                known = self._built.get(id(value))
                return known if known is not None else self._once(value, number)
            if free_unbacked_symbols(value.value):
                # A number only the data gives (``t.item()``, ``mask.sum().item()``): no input size
                # computes it, so the graph returns it (and its node is no longer a dead size read).
                value.node.meta.pop(SYMBOLIC_NODE, None)
                return f"__o[{self.output_index(value.node)}]"
            if self.render_symbolic is None:
                raise CannotReconstruct(f"cannot rebuild {value} after a graph break")
            # Recomputed from the inputs' sizes on each call (``L[0].size(1) * 2``), not a graph output.
            return f"({self.render_symbolic(value.value)})"
        if isinstance(value, NullVariable):
            return self.constant(invoke)
        if isinstance(value, TupleVariable):
            if value.source is not None and value.cls is None:  # tuples are immutable: the same object
                return value.source.expr()
            inner = "".join(f"{self.expr(item)}, " for item in value.items)
            if value.cls is not None:
                if hasattr(value.cls, "_make"):
                    return f"{self.constant(value.cls)}._make(({inner}))"
                return f"{self.constant(value.cls)}(({inner}))"
            return f"({inner})"
        if id(value) in self._built:
            return self._built[id(value)]
        rebuild_self = getattr(value, "reconstruct", None)  # trackers that know their own Python form
        if rebuild_self is not None:
            return str(rebuild_self(self))
        if isinstance(value, CellVariable):
            contents = self.expr(value.contents) if value.contents is not None else ""
            return self._once(value, f"{self.constant(types.CellType)}({contents})")
        if isinstance(value, RealCellVariable):
            if value.source is None:
                return self.constant(value.cell)
            text = value.source.expr()
            return text[: -len(".cell_contents")] if text.endswith(".cell_contents") else text
        if isinstance(value, NestedFunctionVariable):
            defaults = "(" + "".join(f"{self.expr(d)}, " for d in value.defaults) + ")"
            kwdefaults = "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in value.kwdefaults.items()) + "}"
            closure = "(" + "".join(f"{self.expr(c)}, " for c in value.closure) + ")"
            built = (f"{self.constant(make_function)}({self.constant(value.code)}, {self.constant(value.f_globals)}, "
                     f"{defaults}, {kwdefaults}, {closure})")
            return f"{wrap_callee}({built})" if wrap_callee else built
        if isinstance(value, NewObjectVariable):
            attrs = "{" + ", ".join(f"{k!r}: {self.expr(v)}" for k, v in value.attrs.items()) + "}"
            return self._once(value, f"{self.constant(new_object)}({self.constant(value.cls)}, {attrs})")
        if isinstance(value, ListVariable):
            if value.source is not None:
                return value.source.expr()
            return self._once(value, "[" + ", ".join(self.expr(item) for item in value.items) + "]")
        if isinstance(value, ModelOutputVariable) and value.source is not None:
            return value.source.expr()
        if isinstance(value, ModelOutputVariable):
            fields = ", ".join(f"{k}={self.expr(v)}" for k, v in value.rebuild_fields().items())
            return self._once(value, f"{self.constant(value.cls)}({fields})")
        if isinstance(value, DictVariable):
            if value.source is not None:
                return value.source.expr()
            return self._once(value, "{" + ", ".join(f"{self.constant(k)}: {self.expr(v)}"
                                                     for k, v in value.items.items()) + "}")
        if isinstance(value, IteratorVariable):
            return self._once(value, "iter([" + ", ".join(self.expr(item) for item in value.remaining()) + "])")
        if isinstance(value, UserFunctionVariable):
            text = value.source.expr() if value.source is not None else self.constant(value.fn)
            return f"{wrap_callee}({text})" if wrap_callee else text
        if isinstance(value, BoundMethodVariable):
            function = self.expr(value.function, wrap_callee=wrap_callee)
            return f"{self.constant(types.MethodType)}({function}, {self.expr(value.receiver)})"
        if isinstance(value, NNModuleVariable):
            text = value.source.expr() if value.source is not None else self.constant(value.module)
            return f"{wrap_callee}({text})" if wrap_callee else text
        if isinstance(value, (PythonObjectVariable,)):
            text = value.source.expr() if value.source is not None else self.constant(value.value)
            return f"{wrap_callee}({text})" if wrap_callee else text  # an object with __call__: wraps that
        if isinstance(value, PartialVariable):
            if value.source is not None:
                text = value.source.expr()
                return f"{wrap_callee}({text})" if wrap_callee else text
            args = "".join(f", {self.expr(item)}" for item in value.args)
            kwargs = ", **{" + ", ".join(f"{key!r}: {self.expr(item)}" for key, item in value.kwargs.items()) + "}"
            return f"{self.constant(functools.partial)}({self.expr(value.fn, wrap_callee=wrap_callee)}{args}{kwargs})"
        if isinstance(value, (TorchFunctionVariable, SkippedFunctionVariable)):
            return value.source.expr() if value.source is not None else self.constant(value.fn)
        if isinstance(value, BuiltinVariable):
            return self.constant(value.fn)
        if isinstance(value, WithExitVariable):
            return f"{self.constant(GradModeRestorer)}({value.previous})"
        if isinstance(value, ConstantMethodVariable):
            return self.constant(value.method)
        if isinstance(value, TensorMethodVariable):
            return f"{self.expr(value.tensor)}.{value.name}"
        if isinstance(value, ContainerMethodVariable):
            return f"{self.expr(value.container)}.{value.name}"
        if isinstance(value, DeferredAttributeVariable):
            return f"getattr({self.expr(value.owner)}, {value.name!r})"
        raise CannotReconstruct(f"cannot rebuild {value} after a graph break")
