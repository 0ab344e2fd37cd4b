"""Autograd features inside the region: custom `autograd.Function`s, `Tensor.register_hook`,
`torch.utils.checkpoint` and the torch.func transforms (vmap, grad, jacrev, ...).

A custom Function's `apply` and a transformed function each become one graph node that calls the real
thing, so its forward, its custom backward (with `ctx.save_for_backward`) and the transform run exactly as
in eager. A checkpointed function is inlined: recomputation saves memory but computes the same values.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from capture.variables import upcalls
from capture.variables.base import Unsupported, VariableTracker
from capture.variables.builtins import BuiltinVariable
from capture.variables.common import Args, Kwargs
from capture.variables.containers import TupleVariable
from capture.variables.functional import PartialVariable
from capture.variables.functions import (
    BoundMethodVariable,
    CellVariable,
    NestedFunctionVariable,
    RealCellVariable,
    UserFunctionVariable,
    call_in_grad_mode,
)
from capture.variables.objects import (
    NNModuleVariable,
    PythonObjectVariable,
    SkippedFunctionVariable,
    TorchFunctionVariable,
)
from capture.variables.rebuilding import make_function
from capture.variables.tensor import TensorVariable

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


class GraphCallable:
    """A Python callable recorded as one `call_function` node (FX prints it by `__module__`.`__name__`)."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn = fn
        self.__name__ = name
        self.__qualname__ = name
        self.__module__ = __name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"GraphCallable({self.__name__})"


def realize_function(tx: Tracer, fn: VariableTracker) -> Callable[..., Any]:
    """The real Python callable behind a tracker, for a node that calls it at run time.

    A closure made in the region is rebuilt from its code and cells; it may close over constants and
    existing objects, not over tensors computed in the graph.
    """
    if isinstance(fn, NestedFunctionVariable):
        defaults = tuple(realize_value(tx, d) for d in fn.defaults)
        kwdefaults = {k: realize_value(tx, v) for k, v in fn.kwdefaults.items()}
        closure = tuple(_realize_cell(tx, cell) for cell in fn.closure)
        return make_function(fn.code, fn.f_globals, defaults, kwdefaults, closure)
    if isinstance(fn, TransformedFunctionVariable):
        return fn.transform(realize_function(tx, fn.fn), *fn.options, **fn.keywords)  # type: ignore[no-any-return]
    if isinstance(fn, BoundMethodVariable):
        return types.MethodType(realize_function(tx, fn.function), realize_value(tx, fn.receiver))
    if isinstance(fn, PartialVariable):
        return functools.partial(realize_function(tx, fn.fn), *[realize_value(tx, a) for a in fn.args],
                                 **{k: realize_value(tx, v) for k, v in fn.kwargs.items()})
    value = realize_value(tx, fn)
    if not callable(value):
        raise Unsupported(f"{fn} is not callable", user_error=True)
    return value  # type: ignore[no-any-return]


def realize_value(tx: Tracer, value: VariableTracker) -> Any:
    """The real Python value of a tracker that stands for an existing object or a constant."""
    if isinstance(value, (NestedFunctionVariable, BoundMethodVariable)):
        return realize_function(tx, value)
    if value.is_constant():
        return value.as_constant()
    if isinstance(value, NNModuleVariable):
        return value.module
    if isinstance(value, PythonObjectVariable):
        return value.value
    if isinstance(value, (TorchFunctionVariable, UserFunctionVariable, BuiltinVariable)):
        return value.fn
    if isinstance(value, TupleVariable) and value.cls is None:
        return tuple(realize_value(tx, item) for item in value.items)
    raise Unsupported(f"a function called at run time by the graph closes over {value}")


def _realize_cell(tx: Tracer, cell: VariableTracker) -> types.CellType:
    if isinstance(cell, RealCellVariable):
        if cell.pending is not None:
            raise Unsupported("a closure whose cell the region assigned, called at run time by the graph")
        if cell.source is not None and f"{cell.source.expr()}.cell_contents" in tx.output.run_time_sources:
            raise Unsupported("a closure over a value known only at run time, called at run time by the graph")
        cell.was_read = True  # the graph's function reads it at run time
        return cell.cell
    if isinstance(cell, CellVariable):
        return types.CellType() if cell.contents is None else types.CellType(realize_value(tx, cell.contents))
    raise Unsupported(f"closure cell {cell}")


# --- custom autograd.Function ---------------------------------------------------------------------


class AutogradFunctionApplyVariable(VariableTracker):
    """`MyFunction.apply`: one node calling the real `apply`, so the custom backward is used."""

    def __init__(self, cls: type[torch.autograd.Function]) -> None:
        self.cls = cls

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if kwargs:
            raise Unsupported(f"{self.cls.__name__}.apply() with keyword arguments")
        target = GraphCallable(self.cls.apply, f"{self.cls.__name__}_apply")
        return tx.output.call_graph("call_function", target, args, {})

    def reconstruct(self, rebuild: Any) -> str:
        """The bound `apply` of the class."""
        return f"{rebuild.constant(self.cls)}.apply"

    def __repr__(self) -> str:
        return f"AutogradFunctionApplyVariable({self.cls.__name__})"


upcalls.autograd_function_apply.provide(AutogradFunctionApplyVariable)


# --- Tensor.register_hook -------------------------------------------------------------------------


class _RegisterHook:
    """Run-time half of `tensor.register_hook(hook)` in the graph: registers it and passes the tensor on.

    Only a graph run on real tensors can register a hook; a backend that traces the graph (fake or
    functional tensors, make_fx) would drop it silently, so there it raises, and such backends (aotgrad)
    run the graph eagerly instead.
    """

    def __init__(self, hook: Callable[..., Any]) -> None:
        self.hook = hook

    def __call__(self, tensor: torch.Tensor) -> torch.Tensor:
        if _being_traced(tensor):
            raise RuntimeError("a graph that registers a tensor hook (Tensor.register_hook) cannot be traced "
                               "by a backend: run it on real tensors")
        tensor.register_hook(self.hook)
        return tensor


def _being_traced(tensor: torch.Tensor) -> bool:
    """True when a backend runs the graph on stand-ins (fake or functional tensors, make_fx proxies)."""
    from torch._subclasses.fake_tensor import is_fake
    from torch._subclasses.functional_tensor import FunctionalTensor
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    return is_fake(tensor) or isinstance(tensor, FunctionalTensor) or torch._is_functional_tensor(tensor) or \
        get_proxy_mode() is not None


class TensorRegisterHookVariable(VariableTracker):
    """`tensor.register_hook`: a graph node that registers the real hook on the real tensor."""

    def __init__(self, tensor: TensorVariable) -> None:
        self.tensor = tensor

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if len(args) != 1 or kwargs:
            raise Unsupported("register_hook() takes exactly one argument", user_error=True)
        if not self.tensor.example.requires_grad:
            message = "cannot register a hook on a tensor that doesn't require gradient"
            raise Unsupported(f"RuntimeError: {message}", user_error=True) from RuntimeError(message)
        target = GraphCallable(_RegisterHook(realize_function(tx, args[0])), "register_tensor_hook")
        torch.fx.node.has_side_effect(target)  # the node's output may go unused: keep it anyway
        # Recorded without fake propagation: the target only ever runs on the graph's real inputs.
        node = tx.output.graph.call_function(target, (self.tensor.node,))
        node.meta["example_value"] = self.tensor.example
        return HookHandleVariable()

    def __repr__(self) -> str:
        return f"TensorRegisterHookVariable({self.tensor})"


class HookHandleVariable(VariableTracker):
    """The handle `register_hook` returns; removing the hook inside the region is not modelled."""

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        raise Unsupported(f"hook handle .{name} inside the captured region")


# --- torch.utils.checkpoint -----------------------------------------------------------------------

_CHECKPOINT_OPTIONS = {"use_reentrant", "preserve_rng_state", "determinism_check", "debug"}


class CheckpointVariable(VariableTracker):
    """`torch.utils.checkpoint.checkpoint(fn, *args, ...)`: `fn` is inlined (recomputing saves memory, it
    computes the same values and gradients); the reentrant variant runs it without grad when no tensor
    argument requires grad, as that variant's output then does not require grad either."""

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if not args:
            raise Unsupported("checkpoint() needs a function", user_error=True)
        reentrant_var = kwargs.get("use_reentrant")
        if reentrant_var is not None and not reentrant_var.is_constant():
            raise Unsupported("checkpoint(use_reentrant=<traced value>)")
        reentrant = reentrant_var is None or bool(reentrant_var.as_constant())  # unset means True (torch 2.x)
        context_fn = kwargs.get("context_fn")
        if context_fn is not None and not _is_default_context_fn(context_fn):
            raise Unsupported("checkpoint(context_fn=...) is not captured")
        passed = {k: v for k, v in kwargs.items() if k not in _CHECKPOINT_OPTIONS and k != "context_fn"}
        if not reentrant:
            return args[0].call(tx, list(args[1:]), passed)
        if passed:
            message = "Unexpected keyword arguments: " + ",".join(passed)
            raise Unsupported(f"ValueError: {message}", user_error=True) from ValueError(message)
        # The reentrant variant is an autograd.Function of its tensor arguments running `fn` without grad:
        # when none of them requires grad, neither does its output (even through parameters).
        if any(isinstance(a, TensorVariable) and a.example.requires_grad for a in args[1:]):
            return args[0].call(tx, list(args[1:]), {})
        return call_in_grad_mode(tx, False, args[0], list(args[1:]), {})

    def reconstruct(self, rebuild: Any) -> str:
        """The real `checkpoint` function."""
        return str(rebuild.constant(torch.utils.checkpoint.checkpoint))


def _is_default_context_fn(value: VariableTracker) -> bool:
    noop = getattr(torch.utils.checkpoint, "noop_context_fn", None)
    return isinstance(value, (UserFunctionVariable, TorchFunctionVariable, SkippedFunctionVariable)) and \
        value.fn is noop


# --- torch.func transforms ------------------------------------------------------------------------


class FunctorchTransformVariable(VariableTracker):
    """`torch.vmap`, `torch.func.grad`, `jacrev`, ...: calling it on a function gives a transformed function."""

    def __init__(self, transform: Callable[..., Any]) -> None:
        self.transform = transform

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        if not args:
            raise Unsupported(f"{self.transform.__name__}() needs a function", user_error=True)
        options = [a.as_constant() for a in args[1:]]
        keywords = {k: v.as_constant() for k, v in kwargs.items()}
        return TransformedFunctionVariable(self.transform, args[0], options, keywords)

    def reconstruct(self, rebuild: Any) -> str:
        """The real transform."""
        return str(rebuild.constant(self.transform))


class TransformedFunctionVariable(VariableTracker):
    """`vmap(fn, ...)` made in the region: a call is one node running the real transform of the real `fn`."""

    def __init__(self, transform: Callable[..., Any], fn: VariableTracker, options: list[Any],
                 keywords: dict[str, Any]) -> None:
        self.transform = transform
        self.fn = fn
        self.options = options
        self.keywords = keywords

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: Args, kwargs: Kwargs) -> VariableTracker:
        real = self.transform(realize_function(tx, self.fn), *self.options, **self.keywords)
        name = getattr(self.transform, "__name__", "transform")
        return tx.output.call_graph("call_function", GraphCallable(real, f"{name}_call"), args, kwargs)

    def __repr__(self) -> str:
        return f"TransformedFunctionVariable({self.transform.__name__}, {self.fn})"

