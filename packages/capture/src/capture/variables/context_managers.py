"""`@contextlib.contextmanager` functions: the generator runs up to its yield on entry, the rest on exit."""

from __future__ import annotations

import contextlib
import types
from typing import TYPE_CHECKING, Any

from capture.variables.base import ConstantVariable, Unsupported, VariableTracker
from capture.variables.functions import UserFunctionVariable, bind_arguments

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator


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

    def enter(self, tx: InstructionTranslator) -> tuple[VariableTracker, VariableTracker]:
        """Inline the generator up to its first yield; returns (exit callable, yielded value)."""
        from capture.symbolic.translator import InstructionTranslator

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
        child = InstructionTranslator(tx.output, fn.__code__, fn.__globals__, bound,
                                      dict(zip(fn.__code__.co_freevars, closure)), parent=tx)
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


class GeneratorExitVariable(VariableTracker):
    """The `__exit__` of an entered contextmanager: runs the generator from its yield to its end."""

    def __init__(self, child: Any) -> None:
        self.child = child

    def call(self, tx: InstructionTranslator, args: list[VariableTracker],
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
