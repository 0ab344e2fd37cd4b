"""Context managers: `@contextlib.contextmanager` functions (the generator runs up to its yield on entry,
the rest on exit), `contextlib.suppress` and `nullcontext`, grad modes (`torch.no_grad()`, `enable_grad()`,
`set_grad_enabled(b)`) as contexts, and functions decorated with a grad mode.
"""

from __future__ import annotations

import contextlib
import types
from typing import TYPE_CHECKING, Any

import torch

from capture.variables import upcalls
from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.functions import UserFunctionVariable, bind_arguments, call_in_grad_mode

if TYPE_CHECKING:
    from capture.variables.tracer import Tracer


@contextlib.contextmanager
def _sample() -> Any:
    yield


_HELPER_CODE = _sample.__code__  # every contextmanager-decorated function shares contextlib's helper code


class YieldSignal(Exception):
    """Internal: a suspendable generator frame executed YIELD_VALUE (the sent value is already pushed)."""

    def __init__(self, value: VariableTracker) -> None:
        self.value = value


def contextmanager_generator(value: Any) -> types.FunctionType | None:
    """The generator function behind a `@contextlib.contextmanager` function, else None."""
    if not isinstance(value, types.FunctionType) or value.__code__ is not _HELPER_CODE:
        return None
    wrapped = getattr(value, "__wrapped__", None)
    return wrapped if isinstance(wrapped, types.FunctionType) and wrapped.__code__.co_flags & 0x20 else None


class GeneratorContextVariable(VariableTracker):
    """`cm(...)` of a contextmanager function, before the with-block enters it."""

    def __init__(self, generator: types.FunctionType, args: list[VariableTracker],
                 kwargs: dict[str, VariableTracker]) -> None:
        self.generator = generator
        self.args = args
        self.kwargs = kwargs
        self.entered = False

    def python_type(self) -> type:
        return contextlib._GeneratorContextManager

    def enter(self, tx: Tracer) -> tuple[VariableTracker, VariableTracker]:
        """Inline the generator up to its first yield; returns (exit callable, yielded value)."""
        if self.entered:
            raise Unsupported("a contextmanager context entered twice", user_error=True)
        self.entered = True
        fn = self.generator
        if tx.depth + 1 > tx.output.config.max_inline_depth:
            raise Unsupported(f"call depth past {tx.output.config.max_inline_depth} while inlining {fn.__qualname__}")
        defaults = [tx.output.wrap_value(v, None) for v in (fn.__defaults__ or ())]
        kwdefaults = {k: tx.output.wrap_value(v, None) for k, v in (fn.__kwdefaults__ or {}).items()}
        bound = bind_arguments(fn.__code__, fn.__qualname__, defaults, kwdefaults, self.args, self.kwargs)
        closure = UserFunctionVariable(fn).closure_cells(tx)
        child = tx.child_frame(fn.__code__, fn.__globals__, bound, dict(zip(fn.__code__.co_freevars, closure)))
        child.yielded = []
        child.suspend_on_yield = True
        try:
            child.run_inline()
        except YieldSignal as signal:
            return GeneratorExitVariable(child), signal.value
        raise Unsupported(f"{fn.__qualname__} did not yield (contextmanager generators must yield once)",
                          user_error=True)

    def __repr__(self) -> str:
        return f"GeneratorContextVariable({self.generator.__qualname__})"


@upcalls.decorated_function_call.provide
def decorated_function_call(tx: Tracer, fn: types.FunctionType, args: list[VariableTracker],
                            kwargs: dict[str, VariableTracker]) -> VariableTracker | None:
    """A call of a `@contextlib.contextmanager` function (the context, not yet entered) or of a function
    decorated with a grad mode (inlined in that mode); None for any other function."""
    generator = contextmanager_generator(fn)
    if generator is not None:
        return GeneratorContextVariable(generator, args, kwargs)
    decorated = grad_mode_decoration(fn, tx.grad_enabled)
    if decorated is not None:
        return call_in_grad_mode(tx, decorated[0], tx.output.wrap_value(decorated[1], None), args, kwargs)
    return None


class GeneratorExitVariable(VariableTracker):
    """The `__exit__` of an entered contextmanager: runs the generator from its yield to its end."""

    def __init__(self, child: Any) -> None:
        self.child = child

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if args and not (args[0].is_constant() and args[0].as_constant() is None):
            raise Unsupported("an exception leaving a contextmanager block")
        try:
            self.child.run_inline()
        except YieldSignal:
            raise Unsupported("contextmanager generator yielded more than once", user_error=True) from None
        return ConstantVariable(False)

    def __repr__(self) -> str:
        return f"GeneratorExitVariable({self.child.code.co_qualname})"


# --- contextlib.suppress / nullcontext ------------------------------------------------------------


class SuppressVariable(VariableTracker):
    """`contextlib.suppress(*exceptions)`: an exception of those classes raised in the block is swallowed."""

    def __init__(self, classes: tuple[type, ...]) -> None:
        self.classes = classes

    def python_type(self) -> type:
        return contextlib.suppress

    def enter_with(self, tx: Tracer) -> tuple[VariableTracker, VariableTracker]:
        """BEFORE_WITH: (the exit callable, the value bound by `as`)."""
        return SuppressExitVariable(self.classes), ConstantVariable(None)

    def __repr__(self) -> str:
        return f"SuppressVariable({', '.join(c.__name__ for c in self.classes)})"


class SuppressExitVariable(VariableTracker):
    """`suppress.__exit__`: true (swallow) when the exception's class is one of the suppressed."""

    def __init__(self, classes: tuple[type, ...]) -> None:
        self.classes = classes

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        if not args or (args[0].is_constant() and args[0].as_constant() is None):
            return ConstantVariable(False)
        raised = args[1].python_type() if len(args) > 1 else None
        return ConstantVariable(raised is not None and issubclass(raised, self.classes))


class NullContextVariable(VariableTracker):
    """`contextlib.nullcontext(enter_result)`: entering gives `enter_result`, exiting does nothing."""

    def __init__(self, entered: VariableTracker) -> None:
        self.entered = entered

    def python_type(self) -> type:
        return contextlib.nullcontext

    def enter_with(self, tx: Tracer) -> tuple[VariableTracker, VariableTracker]:
        """BEFORE_WITH: (the exit callable, the value bound by `as`)."""
        return NoopExitVariable(), self.entered


class NoopExitVariable(VariableTracker):
    """An `__exit__` that does nothing and lets exceptions through."""

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return ConstantVariable(None)


# --- functions decorated with @torch.no_grad() / enable_grad() / inference_mode() ----------------

_GRAD_DECORATED_CODE = torch.no_grad()(lambda: None).__code__  # torch's shared `decorate_context` wrapper


def grad_mode_decoration(fn: types.FunctionType, grad_enabled: bool) -> tuple[bool, Any] | None:
    """For a function wrapped by a grad-mode decorator: (grad mode inside, the wrapped function), else None."""
    if fn.__code__ is not _GRAD_DECORATED_CODE or not fn.__closure__:
        return None
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
    try:
        factory, inner = cells["ctx_factory"].cell_contents, cells["func"].cell_contents
    except (KeyError, ValueError):
        return None
    context = getattr(factory, "__self__", None)
    if getattr(factory, "__name__", None) != "clone":
        return None
    enabled = grad_mode_of(context, grad_enabled)
    return None if enabled is None else (enabled, inner)


def grad_mode_of(context: Any, grad_enabled: bool) -> bool | None:
    """The grad mode inside a `torch.no_grad()`, `enable_grad()` or `inference_mode(mode)` object (else None)."""
    if type(context) is torch.no_grad:
        return False
    if type(context) is torch.enable_grad:
        return True
    if type(context) is torch.inference_mode:
        return False if context.mode else grad_enabled
    return None


class GradModeFactoryVariable(VariableTracker):
    """`ctx.clone` of a grad-mode object (what torch's decorators call to get a fresh context)."""

    def __init__(self, context: Any) -> None:
        self.context = context

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        enabled = grad_mode_of(self.context, tx.grad_enabled)
        if args or kwargs or enabled is None:
            raise Unsupported(f"{self.context!r}.clone() with arguments")
        return GradModeVariable(enabled)

    def reconstruct(self, rebuild: Any) -> str:
        """The real bound `clone`."""
        return f"{rebuild.constant(self.context)}.clone"


class GradModeDecoratedVariable(VariableTracker):
    """`torch.no_grad()(fn)` made in the region: calls run `fn` in that grad mode."""

    def __init__(self, enabled: bool, fn: VariableTracker) -> None:
        self.enabled = enabled
        self.fn = fn

    def python_type(self) -> type:
        return types.FunctionType

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        return call_in_grad_mode(tx, self.enabled, self.fn, args, kwargs)

    def __repr__(self) -> str:
        return f"GradModeDecoratedVariable(enabled={self.enabled}, {self.fn})"


class GradModeVariable(VariableTracker):
    """`torch.no_grad()`, `torch.enable_grad()` or `torch.set_grad_enabled(b)` used as a context."""

    def __init__(self, enabled: bool, already_entered_from: bool | None = None) -> None:
        self.enabled = enabled
        self.already_entered_from = already_entered_from

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        """`torch.no_grad()(fn)`: decorating a function inside the region."""
        if len(args) != 1 or kwargs or self.already_entered_from is not None:
            raise Unsupported(f"calling {self} with these arguments")
        return GradModeDecoratedVariable(self.enabled, args[0])

    def enter(self, tx: Tracer) -> VariableTracker:
        """BEFORE_WITH: switch grad mode; returns the exit callable to push."""
        previous = self.already_entered_from if self.already_entered_from is not None else tx.grad_enabled
        tx.set_grad_enabled(self.enabled)
        exit_variable = WithExitVariable(previous)
        tx.grad_blocks.append(exit_variable)
        return exit_variable

    def __repr__(self) -> str:
        return f"GradModeVariable(enabled={self.enabled})"


class WithExitVariable(VariableTracker):
    """The `__exit__` of a grad-mode context: restores the previous mode."""

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        tx.set_grad_enabled(self.previous)
        if self in tx.grad_blocks:
            tx.grad_blocks.remove(self)
        return ConstantVariable(None)


class GradModeRestorer:
    """The `__exit__` of a grad-mode with-block that a graph break cut in two (lives on the resumed stack)."""

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __call__(self, exc_type: Any = None, exc: Any = None, traceback: Any = None) -> None:
        torch._C._set_grad_enabled(self.previous)

    def __repr__(self) -> str:
        return f"GradModeRestorer(previous={self.previous})"


class ProfilerRangeVariable(VariableTracker):
    """`torch.profiler.record_function(name)`: a profiler label, not modelled inside graphs (entering it does
    nothing; the object it gives to `as` cannot be used in the region)."""

    def python_type(self) -> type:
        return torch.autograd.profiler.record_function

    def enter_with(self, tx: Tracer) -> tuple[VariableTracker, VariableTracker]:
        """BEFORE_WITH: (the exit callable, the value bound by `as`)."""
        return NoopExitVariable(), OpaqueVariable("the record_function object")


class OpaqueVariable(VariableTracker):
    """A value the region may hold but not use: any use is a graph break (and it cannot outlive the graph)."""

    def __init__(self, what: str) -> None:
        self.what = what

    def getattr(self, tx: Tracer, name: str) -> VariableTracker:
        raise Unsupported(f"using {self.what} inside the captured region")

    def call(self, tx: Tracer, args: list[VariableTracker],
             kwargs: dict[str, VariableTracker]) -> VariableTracker:
        raise Unsupported(f"using {self.what} inside the captured region")
