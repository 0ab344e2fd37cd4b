"""The part of the instruction translator a variable tracker may call: the `tx` of every tracker method.

Trackers sit below the interpreter and never import it. Through this protocol they add graph nodes and
read sources (`output.call_graph`, `output.wrap_value`, `output.guards`), inline a call (`inline_call`,
`call_module`, `child_frame`), apply an operator or read an attribute the way the bytecode does
(`apply_operator`, `get_attribute`), and follow grad mode. A graph break is `raise Unsupported(...)`.
`symbolic/translator.py`'s `InstructionTranslator` implements it.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Protocol

from capture.variables.base import VariableTracker

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph
    from capture.variables.objects import NNModuleVariable


class Tracer(Protocol):
    """What a variable tracker may ask of the frame being traced."""

    output: OutputGraph  # the graph being built, its guards, side effects and inputs
    code: types.CodeType
    f_globals: dict[str, Any]
    locals: dict[str, VariableTracker]
    cells: dict[str, VariableTracker]
    depth: int  # inlining depth: 0 for the root frame
    grad_blocks: list[Any]  # exits of the grad-mode with-blocks open in this frame
    yielded: list[VariableTracker] | None  # a generator frame's values so far
    suspend_on_yield: bool  # a contextmanager's generator: YIELD_VALUE pauses the frame

    @property
    def grad_enabled(self) -> bool:
        """The grad mode at this point of the trace."""
        ...

    def set_grad_enabled(self, enabled: bool) -> None:
        """Switch grad mode in the trace and in the graph."""
        ...

    def inline_call(self, code: types.CodeType, f_globals: dict[str, Any], bound: dict[str, VariableTracker],
                    closure: list[VariableTracker], name: str) -> VariableTracker:
        """Inline a call to a Python function into the current graph."""
        ...

    def call_module(self, module_var: NNModuleVariable, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Call an nn.Module: a call_module node for torch.nn leaves, else its forward inlined."""
        ...

    def child_frame(self, code: types.CodeType, f_globals: dict[str, Any], bound: dict[str, VariableTracker],
                    cells: dict[str, VariableTracker]) -> Tracer:
        """A frame called from this one, sharing its graph, not yet run (a contextmanager's generator)."""
        ...

    def run_inline(self) -> VariableTracker:
        """Run this (child) frame to its return value."""
        ...

    def apply_operator(self, fn: Any, args: list[VariableTracker]) -> VariableTracker:
        """`fn(*args)` for an `operator` function, as the bytecode's operators do."""
        ...

    def get_attribute(self, owner: VariableTracker, name: str) -> VariableTracker:
        """`owner.name` as LOAD_ATTR reads it (attribute stores made earlier in the region included)."""
        ...
