"""The instruction translator: steps through bytecode on variable trackers, one frame at a time.

The root translator runs the captured function; calls to user functions run in child
translators that share the same `OutputGraph` (inlining). A graph break anywhere is an
`Unsupported` exception that unwinds to the root, which records where it happened.
"""

from __future__ import annotations

import types
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

import capture.variables.providers  # noqa: F401  (every tracker upcall provided before a trace)
from capture.bytecode.registry import handler_for, unsupported_reason
from capture.distributed import DATA_PARALLEL_BREAK_REASON, is_data_parallel
from capture.errors import CaptureError, UserLocation
from capture.sources import AttrSource
from capture.symbolic.attributes import get_attribute
from capture.symbolic.code_info import CodeInfo, code_info
from capture.symbolic.operators import apply_operator
from capture.variables.autocast import RECURRENT_UNDER_CPU_AUTOCAST, cpu_autocast_enabled
from capture.variables.base import ConstantVariable, ExceptionVariable, Unsupported, VariableTracker
from capture.variables.containers import IteratorVariable, TupleVariable
from capture.variables.context_managers import YieldSignal
from capture.variables.functions import BoundMethodVariable, CellVariable, UserFunctionVariable
from capture.variables.objects import NNModuleVariable
from capture.variables.rebuilding import CannotReconstruct
from capture.variables.recurrent import long_recurrence

if TYPE_CHECKING:
    from capture.symbolic.output_graph import OutputGraph

_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200
_CONTAINER_MODULES = (torch.nn.Sequential, torch.nn.ModuleList, torch.nn.ModuleDict, torch.nn.ParameterList,
                      torch.nn.ParameterDict)


class ReturnSignal(Exception):
    """Internal: the frame executed RETURN_VALUE."""

    def __init__(self, value: VariableTracker) -> None:
        self.value = value


@dataclass
class BreakPoint:
    """Where the root frame must stop: instruction index and how many times it was reached before."""

    index: int
    visit: int


@dataclass
class StoppedAt:
    """The root frame's state when it stopped at a break point."""

    index: int
    stack: list[VariableTracker]
    locals: dict[str, VariableTracker]
    grad_blocks: list[Any] = field(default_factory=list)
    cells: dict[str, VariableTracker] = field(default_factory=dict)


def _unbacked_condition(error: GuardOnDataDependentSymNode) -> str:
    """The condition or number a data-dependent guard was asked for (``Eq(u0, 0)``), for the reason."""
    cond = getattr(error, "cond", None)
    return f"`{cond}`" if cond is not None else "a number computed from a tensor's values"


def _needs_data(error: BaseException) -> bool:
    """True when `error` was caused by Python needing a number only run-time data gives: capture's own limit, never
    an exception of the user's program for its `except` to handle (``try: range(n)`` of an unbacked ``n``)."""
    cause = error.__cause__
    while cause is not None:
        if isinstance(cause, GuardOnDataDependentSymNode):
            return True
        cause = cause.__cause__
    return False


def _is_control_flow(error: Exception) -> bool:
    """Exceptions the tracer and its callers use on purpose (returns, yields, breaks, user-facing errors)."""
    return isinstance(error, (ReturnSignal, FirstBreak, YieldSignal, CaptureError, CannotReconstruct)) or \
        type(error).__module__.startswith("capture.convert_frame")


@dataclass
class FirstBreak(Exception):
    """Raised out of the root frame on a graph break (first pass)."""

    index: int
    visit: int
    reason: str
    user_error: bool
    user_stack: list[UserLocation] = field(default_factory=list)
    resumable: bool = True
    open_grad_blocks: int = 0
    null_below: bool | None = None  # for a break at a CALL: a NULL (not a method) below its callable


class InstructionTranslator:
    """Interprets one frame's bytecode symbolically."""

    def __init__(self, output: OutputGraph, code: types.CodeType, f_globals: dict[str, Any],
                 local_values: dict[str, VariableTracker], cells: dict[str, VariableTracker],
                 parent: InstructionTranslator | None = None, break_point: BreakPoint | None = None) -> None:
        self.output = output
        self.code = code
        self.info: CodeInfo = code_info(code)
        self.f_globals = f_globals
        self.locals: dict[str, VariableTracker] = dict(local_values)
        self.cells: dict[str, VariableTracker] = dict(cells)
        self.stack: list[VariableTracker] = []
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.ip = 0
        self.current = 0
        self.kw_names: tuple[str, ...] = ()
        self.break_point = break_point
        self.visits: dict[int, int] = {}
        self.yielded: list[VariableTracker] | None = None
        self.suspend_on_yield = False  # a contextmanager's generator: YIELD_VALUE pauses the frame
        self.grad_blocks: list[Any] = []  # exits of the grad-mode with-blocks open in this frame
        for name in code.co_cellvars:
            if name not in self.cells:
                self.cells[name] = CellVariable(self.locals.get(name))

    # -- state shared through the output graph -------------------------------------------------
    @property
    def grad_enabled(self) -> bool:
        """The grad mode at this point of the trace."""
        return self.output.grad_enabled

    def set_grad_enabled(self, enabled: bool) -> None:
        """Switch grad mode in the trace and in the graph."""
        self.output.set_grad_enabled(enabled)

    # -- stack helpers -------------------------------------------------------------------------
    def push(self, value: VariableTracker) -> None:
        """Push onto the value stack."""
        self.stack.append(value)

    def pop(self) -> VariableTracker:
        """Pop from the value stack."""
        return self.stack.pop()

    def popn(self, n: int) -> list[VariableTracker]:
        """Pop `n` values, returned in push order."""
        if n == 0:
            return []
        values = self.stack[-n:]
        del self.stack[-n:]
        return values

    def jump_to(self, instr: Any) -> None:
        """Continue at the jump target of `instr`."""
        self.ip = self.info.target(instr)

    def location(self) -> UserLocation:
        """The user's file:line of the instruction being executed."""
        instr = self.info.instructions[self.current]
        lineno = instr.lineno if isinstance(instr.lineno, int) else self.code.co_firstlineno
        return UserLocation(self.code.co_filename, lineno, self.code.co_name)

    def user_stack(self) -> list[UserLocation]:
        """Locations from the root frame down to this one."""
        frames: list[UserLocation] = []
        tx: InstructionTranslator | None = self
        while tx is not None:
            frames.append(tx.location())
            tx = tx.parent
        return list(reversed(frames))

    # -- running -------------------------------------------------------------------------------
    def step(self) -> None:
        """Execute one instruction."""
        instr = self.info.instructions[self.ip]
        self.current = self.ip
        self.ip += 1
        handler = handler_for(instr.name)
        if handler is None:
            raise Unsupported(unsupported_reason(instr.name) or instr.name)
        output = self.output
        output.active_tx = self  # new guards record this instruction's line
        try:
            handler(self, instr)
            output.note_shape_guards(self)
        except Unsupported as error:
            output.note_shape_guards(self)
            entry = self.info.try_entries.get(self.current)
            exception = error.exception
            cause = error.__cause__
            if exception is None and isinstance(cause, Exception) and not getattr(error, "from_tensor_op", False):
                exception = cause  # raised by evaluating the user's Python on real values: eager raises it too
            if exception is None or entry is None or not error.user_error or _needs_data(error):
                raise
            self._unwind_to(entry, exception)
        except GuardOnDataDependentSymNode as error:
            # Python needs the value of a number only the data gives (`if n > 0:` on `n = t.item()`,
            # `range(mask.sum().item())`): the graph ends before this line, which runs eagerly.
            output.note_shape_guards(self)
            raise Unsupported(f"data-dependent control flow: Python needs the value of {_unbacked_condition(error)}, "
                              "which depends on a tensor's data") from error
        except Exception as error:
            if _is_control_flow(error) or not output.config.fallback_on_internal_error:
                raise
            # A bug in capture, not in the user's program: break the graph here (this instruction then
            # runs in plain Python, as eager runs it) instead of crashing the user's program.
            where = self.location()
            reason = f"internal error in capture at {instr.name}: {type(error).__name__}: {error}"
            warnings.warn(f"capture: {reason}; graph break at {where.filename}:{where.lineno}"
                          f"{': ' + where.source_line if where.source_line else ''}", RuntimeWarning, stacklevel=2)
            output.note_shape_guards(self)
            raise Unsupported(reason) from error

    def _unwind_to(self, entry: Any, exception: BaseException) -> None:
        """Continue at the exception handler of `entry`, as CPython's exception table says."""
        depth = int(entry.stack_depth)
        if len(self.stack) < depth:
            raise Unsupported("exception unwinding below the handler's stack depth")
        del self.stack[depth:]
        if entry.push_lasti:
            self.push(ConstantVariable(self.current))
        self.push(ExceptionVariable(exception))
        self.ip = self.info.label_index[entry.target]

    def run_root(self) -> VariableTracker | StoppedAt:
        """Run the root frame to its return, or to the break point; raise FirstBreak on a break."""
        while True:
            index = self.ip
            visit = self.visits.get(index, 0)
            self.visits[index] = visit + 1
            if self.break_point is not None and (index, visit) == (self.break_point.index, self.break_point.visit):
                self.current = index
                own_cells = {name: self.cells[name] for name in self.code.co_cellvars if name in self.cells}
                return StoppedAt(index, list(self.stack), dict(self.locals), list(self.grad_blocks), own_cells)
            try:
                self.step()
            except ReturnSignal as returned:
                return returned.value
            except Unsupported as error:
                stack = getattr(error, "user_stack", None) or self._innermost_stack(error)
                raise FirstBreak(index, visit, error.reason, error.user_error, stack, error.resumable,
                                 len(self.grad_blocks), getattr(error, "null_below", None)) from error

    def _innermost_stack(self, error: Unsupported) -> list[UserLocation]:
        return self.user_stack()

    def run_inline(self) -> VariableTracker:
        """Run an inlined frame to its return value."""
        try:
            while True:
                self.step()
        except ReturnSignal as returned:
            return returned.value
        except Unsupported as error:
            if not hasattr(error, "user_stack"):
                error.user_stack = self.user_stack()  # type: ignore[attr-defined]
            raise

    # -- what trackers call back (the `Tracer` protocol, variables/tracer.py) --------------------
    def apply_operator(self, fn: Any, args: list[VariableTracker]) -> VariableTracker:
        """`fn(*args)` for an `operator` function, as the bytecode's operators do."""
        return apply_operator(self, fn, args)

    def get_attribute(self, owner: VariableTracker, name: str) -> VariableTracker:
        """`owner.name` as LOAD_ATTR reads it (attribute stores made earlier in the region included)."""
        return get_attribute(self, owner, name)

    def child_frame(self, code: types.CodeType, f_globals: dict[str, Any], bound: dict[str, VariableTracker],
                    cells: dict[str, VariableTracker]) -> InstructionTranslator:
        """A frame called from this one, sharing its graph, not yet run (a contextmanager's generator)."""
        return InstructionTranslator(self.output, code, f_globals, bound, cells, parent=self)

    # -- calls ---------------------------------------------------------------------------------
    def inline_call(self, code: types.CodeType, f_globals: dict[str, Any], bound: dict[str, VariableTracker],
                    closure: list[VariableTracker], name: str) -> VariableTracker:
        """Inline a call to a Python function into the current graph."""
        if self.depth + 1 > self.output.config.max_inline_depth:
            raise Unsupported(f"call depth past {self.output.config.max_inline_depth} while inlining {name}")
        if code.co_flags & (_GENERATOR_FLAGS & ~0x20):
            raise Unsupported(f"{name} is a coroutine or async generator")
        cells = dict(zip(code.co_freevars, closure))
        child = InstructionTranslator(self.output, code, f_globals, bound, cells, parent=self)
        try:
            return self._run_child(child, code, name)
        finally:
            self.output.active_tx = self

    def _run_child(self, child: InstructionTranslator, code: types.CodeType, name: str) -> VariableTracker:
        if not code.co_flags & 0x20:
            return child.run_inline()
        # A generator runs to completion here; its values are what the iterator yields.
        effects = self.output.side_effects
        before = (len(effects.attribute_stores), len(effects.global_stores), len(effects.containers), len(effects.cells))
        child.yielded = []
        child.run_inline()
        after = (len(effects.attribute_stores), len(effects.global_stores), len(effects.containers), len(effects.cells))
        if after != before:
            raise Unsupported(f"generator {name} mutates existing Python state")
        return IteratorVariable(child.yielded)

    def call_function(self, fn: VariableTracker, args: list[VariableTracker],
                      kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """`fn(*args, **kwargs)` on trackers."""
        return fn.call(self, args, kwargs)

    def call_module(self, module_var: NNModuleVariable, args: list[VariableTracker],
                    kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """Call an nn.Module: a call_module node for torch.nn leaves, else inline forward (with hooks)."""
        module = module_var.module
        if is_data_parallel(module):  # DDP's forward drives its reducer: it runs eagerly
            raise Unsupported(DATA_PARALLEL_BREAK_REASON)
        source = module_var.source
        if source is not None and not source.guard_free:
            # Hooks are read (and inlined) now: one added or removed later must recompile.
            self.output.guards.hooks_of(source, module)
        self.output.guards.global_module_hooks()
        instance_forward = module.__dict__.get("forward")
        if instance_forward is not None:  # `module.forward = ...` on the instance: what `module(...)` runs
            return self._call_patched_forward(module_var, instance_forward, args, kwargs)
        if source is not None and not source.guard_free:
            self.output.guards.absent_attribute(source, "forward")
        if module._backward_hooks or getattr(module, "_backward_pre_hooks", None):
            raise Unsupported(f"backward hooks on {type(module).__name__}")
        global_hooks = _global_module_hooks()
        pre_hooks = list(global_hooks[0]) + list(module._forward_pre_hooks.values())
        post_hooks = list(global_hooks[1]) + list(module._forward_hooks.values())
        if getattr(module, "_forward_hooks_with_kwargs", None) or getattr(module, "_forward_pre_hooks_with_kwargs", None):
            raise Unsupported("module hooks that take keyword arguments")
        is_leaf = type(module).__module__.startswith("torch.nn.") and not isinstance(module, _CONTAINER_MODULES)
        if isinstance(module, torch.nn.RNNBase) and cpu_autocast_enabled(self):
            raise Unsupported(RECURRENT_UNDER_CPU_AUTOCAST.format(f"nn.{type(module).__name__}"))
        if isinstance(module, torch.nn.RNNBase) and args:
            reason = long_recurrence(f"nn.{type(module).__name__}", args[0], bool(module.batch_first))
            if reason is not None:
                raise Unsupported(reason)
        if is_leaf and not pre_hooks and not post_hooks:
            target = self.output.register_module(module, module_var.source)
            return self.output.call_graph("call_module", target, args, kwargs)
        for hook in pre_hooks:
            result = self.output.wrap_value(hook, None).call(self, [module_var, TupleVariable(list(args))], {})
            if not (result.is_constant() and result.as_constant() is None):
                args = list(result.items) if isinstance(result, TupleVariable) else [result]
        if is_leaf:
            target = self.output.register_module(module, module_var.source)
            output = self.output.call_module_without_hooks(module, target, args, kwargs)
        elif isinstance(module, torch.nn.Sequential) and type(module).forward is torch.nn.Sequential.forward:
            (output,) = args
            for child in module_var.iterate(self):
                output = child.call(self, [output], {})
        else:
            forward: Any = type(module).forward
            output = BoundMethodVariable(UserFunctionVariable(forward), module_var).call(self, args, kwargs)
        for hook in post_hooks:
            result = self.output.wrap_value(hook, None).call(
                self, [module_var, TupleVariable(list(args)), output], {})
            if not (result.is_constant() and result.as_constant() is None):
                output = result
        return output

    def _call_patched_forward(self, module_var: NNModuleVariable, forward: Any, args: list[VariableTracker],
                              kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """A module whose instance has its own `forward`: hooks are not supported here, the function is inlined."""
        module = module_var.module
        if module._forward_hooks or module._forward_pre_hooks or module._backward_hooks or \
                getattr(module, "_backward_pre_hooks", None) or any(_global_module_hooks()):
            raise Unsupported(f"hooks on {type(module).__name__} whose instance has its own forward")
        source = AttrSource(module_var.source, "forward") if module_var.source is not None else None
        return self.output.wrap_value(forward, source).call(self, args, kwargs)


def _global_module_hooks() -> tuple[list[Any], list[Any]]:
    from torch.nn.modules import module as module_impl

    pre = list(getattr(module_impl, "_global_forward_pre_hooks", {}).values())
    post = list(getattr(module_impl, "_global_forward_hooks", {}).values())
    return pre, post


def constant(value: Any) -> ConstantVariable:
    """Shorthand used by handlers."""
    return ConstantVariable(value)
