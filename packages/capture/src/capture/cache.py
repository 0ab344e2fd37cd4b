"""The code cache and the call path: look up guarded entries, else compile.

`CodeCache` holds, per code object and backend, the compiled entries (first passing guard wins).
`CaptureContext` bundles what one `optimize(...)` call configured: backend, nopython, config,
hooks and the cache it uses; every wrapper it makes (including resume functions) shares it.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from capture.bytecode import dialects
from capture.bytecode.codegen import resume_code
from capture.bytecode.eager_calls import eager_code_with_captured_call
from capture.config import CaptureConfig
from capture.errors import BackendCompilerError, GraphBreakError, InternalCaptureError, RecompileLimitWarning
from capture.events import CaptureHooks, Recompiled
from capture.guards import failing_values, first_failure
from capture.libraries import is_stdlib_or_skipped
from capture.symbolic.shapes import AutomaticDynamic
from capture.variables.base import class_attribute

log = logging.getLogger("capture")
CompilerFn = Callable[[torch.fx.GraphModule, list[torch.Tensor]], Callable[..., Any]]
FROZEN: contextvars.ContextVar[bool] = contextvars.ContextVar("capture_frozen", default=False)
"""True while `capture.run(fn)` runs: use cached entries only, never compile."""


@dataclass
class CodeState:
    """Cache entries of one code object for one backend."""

    entries: list[Any] = field(default_factory=list)
    eager_reason: str | None = None
    warned: bool = False
    ctx: CaptureContext | None = None
    eager_code: types.CodeType | None = None  # what runs instead of the code when it runs eagerly
    automatic: AutomaticDynamic = field(default_factory=AutomaticDynamic)


@dataclass
class CodeCache:
    """All compiled entries, keyed by code object and backend."""

    states: dict[tuple[types.CodeType, int], CodeState] = field(default_factory=dict)
    resume_wrappers: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    generation: int = 0
    compile_lock: threading.RLock = field(default_factory=threading.RLock)
    """Held while a frame compiles: one compile at a time in the process (tracing uses process-wide
    state, e.g. make_fx's current tracer), and threads that missed together compile the entry once."""

    def state(self, code: types.CodeType, ctx: CaptureContext) -> CodeState:
        """The state for `code` under `ctx`'s backend (created on first use)."""
        key = (code, ctx.backend_key)
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = CodeState(ctx=ctx)
        return state

    def states_for(self, code: types.CodeType) -> list[CodeState]:
        """Every backend's state for `code`."""
        return [state for (c, _), state in self.states.items() if c is code]

    def clear(self) -> None:
        """Forget everything (what `capture.reset()` does)."""
        self.states.clear()
        self.resume_wrappers.clear()
        self.generation += 1


DEFAULT_CACHE = CodeCache()
"""The process-wide code cache (the role CPython's per-code `co_extra` plays for TorchDynamo)."""


def bind_frame_arguments(fn: types.FunctionType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """Argument values in `co_varnames` order, as the frame would see them.

    Positional-only calls (the common case: ``model(x)`` reaching ``forward(self, x, mask=None,
    **kwargs)``) are bound directly from `__defaults__`, without `inspect` (which costs ~50 us a call).
    """
    code = fn.__code__
    if not kwargs and not code.co_kwonlyargcount:
        fast = _bind_positional(fn, code, args)
        if fast is not None:
            return fast
    bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    bound.apply_defaults()
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return [bound.arguments[name] for name in code.co_varnames[:nargs]]


def _bind_positional(fn: types.FunctionType, code: types.CodeType, args: tuple[Any, ...]) -> list[Any] | None:
    """`bind_frame_arguments` for positional arguments only; None when `inspect` must decide (or raise)."""
    count = code.co_argcount
    values = list(args[:count])
    missing = count - len(values)
    if missing:
        defaults = fn.__defaults__ or ()
        if missing > len(defaults):
            return None  # a required argument is missing: let `inspect` raise the TypeError
        values += defaults[len(defaults) - missing:]
    if code.co_flags & 0x04:  # *args
        values.append(tuple(args[count:]))
    elif len(args) > count:
        return None  # too many arguments: `inspect` raises
    if code.co_flags & 0x08:  # **kwargs
        values.append({})
    return values


SUPPORTED_PYTHONS = dialects.SUPPORTED
_UNSUPPORTED_PYTHON = (f"capture supports Python {', '.join('.'.join(map(str, v)) for v in SUPPORTED_PYTHONS)}; "
                       f"on Python {sys.version_info.major}.{sys.version_info.minor} compiled functions run eagerly")


def python_supported() -> bool:
    """Whether capture can rewrite this interpreter's bytecode (elsewhere every function runs eagerly)."""
    return sys.version_info[:2] in SUPPORTED_PYTHONS


@functools.cache
def _warn_unsupported_python() -> None:
    """Say once per process that nothing is compiled on this Python."""
    warnings.warn(_UNSUPPORTED_PYTHON, RuntimeWarning, stacklevel=6)


def run_eagerly(fn: types.FunctionType, state: CodeState, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `fn` in plain Python: its own code, or the copy whose breaking call still captures the callee."""
    code = state.eager_code
    if code is None:
        return fn(*args, **kwargs)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy(*args, **kwargs)


def _traced_into(fn: types.FunctionType) -> bool:
    """False for functions a trace never inlines (torch's own, the stdlib, known non-PyTorch libraries)."""
    module = getattr(fn, "__module__", "") or ""
    return not (module == "torch" or module.startswith("torch.") or is_stdlib_or_skipped(fn))


class CaptureContext:
    """What one `optimize(...)` configured; creates wrappers and compiles frames."""

    def __init__(self, backend: CompilerFn, *, nopython: bool = False, config: CaptureConfig,
                 hooks: CaptureHooks | None = None, cache: CodeCache | None = None, export: bool = False,
                 dynamic: bool | None = None) -> None:
        self.backend = backend
        self.backend_key = id(backend)
        self.nopython = nopython
        self.dynamic = dynamic  # True: symbolic sizes; False: static; None: static, then automatic dynamic
        self.config = config
        self.hooks = hooks or CaptureHooks()
        self.cache = cache if cache is not None else DEFAULT_CACHE
        self.export = export
        self._function_wrappers: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    # -- wrappers ------------------------------------------------------------------------------
    def wrap_function(self, fn: types.FunctionType) -> Any:
        """The capturing wrapper of a Python function (one per function)."""
        from capture.api import CapturedFunction

        wrapper = self._function_wrappers.get(fn)
        if wrapper is None:
            wrapper = CapturedFunction(fn, self)
            self._function_wrappers[fn] = wrapper
        return wrapper

    def wrap_callee(self, value: Any) -> Any:
        """The callee of a call that broke the graph: captured on its own when it runs.

        As for a plain function, so for the other callables a traced call inlines: a bound method, a
        module, a `functools.partial` (its function wrapped, its arguments kept) and an object whose
        class defines `__call__` in Python.
        """
        from capture.api import wrap_for_capture

        if getattr(value, "_kiln_original", None) is not None or getattr(value, "_kiln_disabled", False):
            return value
        if isinstance(value, (types.FunctionType, types.MethodType, torch.nn.Module)):
            return wrap_for_capture(value, self)
        if type(value) is functools.partial:
            inner = self.wrap_callee(value.func)
            return value if inner is value.func else functools.partial(inner, *value.args, **value.keywords)
        call_method = None if isinstance(value, type) else class_attribute(type(value), "__call__")
        if isinstance(call_method, types.FunctionType) and _traced_into(call_method):
            return wrap_for_capture(value, self)
        return value

    def wrap_traced_callee(self, value: Any) -> Any:
        """`wrap_callee` for a call whose callee is known only at run time: never torch's or the stdlib's."""
        fn = value.__func__ if isinstance(value, types.MethodType) else value
        if isinstance(fn, types.FunctionType) and not _traced_into(fn):
            return value
        return self.wrap_callee(value)

    def resume_function(self, code: types.CodeType, target: int, depth: int, names: tuple[str, ...],
                        f_globals: dict[str, Any], closure: tuple[Any, ...] | None,
                        null_slots: frozenset[int] = frozenset()) -> Any:
        """The captured resume function at instruction `target` of `code` (`null_slots`: stack positions of NULLs)."""
        key = (code, target, depth, names, null_slots, id(f_globals), id(closure), self.backend_key)
        wrapper = self.cache.resume_wrappers.get(key)
        if wrapper is None:
            rcode = resume_code(code, target, depth, names, null_slots)
            fn = types.FunctionType(rcode, f_globals, rcode.co_name, None, closure)
            wrapper = self.wrap_function(fn)
            wrapper._kiln_keepalive = (f_globals, closure, fn)
            self.cache.resume_wrappers[key] = wrapper
        return wrapper

    # -- the call path -------------------------------------------------------------------------
    def call(self, fn: types.FunctionType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run `fn` through the cache: a passing entry, else compile (or run eagerly)."""
        code = fn.__code__
        state = self.cache.state(code, self)
        try:
            L: Any = bind_frame_arguments(fn, args, kwargs) if kwargs or len(args) != code.co_argcount \
                or code.co_flags & 0x0C or code.co_kwonlyargcount else args
        except TypeError:
            return fn(*args, **kwargs)
        G, C = fn.__globals__, fn.__closure__
        for entry in state.entries:
            if entry.check(L, G, C):
                return entry.run(L, G, C)
        if state.eager_reason is not None or FROZEN.get():
            return run_eagerly(fn, state, args, kwargs)
        return self.compile_and_run(fn, state, L, args, kwargs)

    def _compiled_meanwhile(self, state: CodeState, known: int, L: Any, G: Any, C: Any) -> Any:
        """An entry another thread added (after the first `known`) while this one waited, that fits this call."""
        for entry in state.entries[known:]:
            if entry.check(L, G, C):
                return entry
        return None

    def _report_recompile(self, code: types.CodeType, state: CodeState, L: Any, G: Any, C: Any) -> str:
        """Tell the hooks (and the log) which guard of the last entry failed, its value, and its line."""
        guard_set = state.entries[-1].guard_set
        failed = first_failure(guard_set, L, G, C)
        failed_text = str(failed) if failed is not None else "unknown guard"
        values = failing_values(guard_set, failed, L, G, C) if failed is not None else ""
        location = failed.location if failed is not None else None
        self.hooks.recompile(Recompiled(code.co_name, code.co_filename, code.co_firstlineno, failed_text,
                                        len(state.entries), failed, values, location))
        where = f" (guard installed at {failed.where()})" if failed is not None and failed.where() else ""
        log.info("capture: recompiling %s: guard failed: %s; now %s%s", code.co_name, failed_text, values, where)
        return failed_text

    def compile_and_run(self, fn: types.FunctionType, state: CodeState, L: Any, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
        """Compile a new entry for this call (after a cache miss) and run it."""
        code = fn.__code__
        G, C = fn.__globals__, fn.__closure__
        if code.co_flags & 0x3A0:  # generator, coroutine, async generator, iterable coroutine
            state.eager_reason = "generators and coroutines run eagerly"
            return fn(*args, **kwargs)
        known = len(state.entries)
        with self.cache.compile_lock:
            entry = self._compiled_meanwhile(state, known, L, G, C)
            if entry is None and state.eager_reason is None:
                entry = self._compile(fn, state, L)
        if entry is None:
            return run_eagerly(fn, state, args, kwargs)
        return entry.run(L, G, C)

    def _compile(self, fn: types.FunctionType, state: CodeState, L: Any) -> Any:
        """A new entry for this call (under the compile lock), or None when the function must run eagerly."""
        from capture.convert_frame import CannotResume, Frame, UserCodeError, compile_frame

        code = fn.__code__
        G, C = fn.__globals__, fn.__closure__
        if not python_supported():
            state.eager_reason = _UNSUPPORTED_PYTHON
            if self.nopython:
                raise InternalCaptureError(_UNSUPPORTED_PYTHON)
            _warn_unsupported_python()
            return None
        if state.entries:
            failed_text = self._report_recompile(code, state, L, G, C)
            if len(state.entries) >= self.config.cache_size_limit:
                state.eager_reason = f"cache_size_limit ({self.config.cache_size_limit}) reached"
                if not state.warned:
                    state.warned = True
                    warnings.warn(RecompileLimitWarning(
                        f"capture: {code.co_name} ({code.co_filename}:{code.co_firstlineno}) was recompiled "
                        f"{len(state.entries)} times, hitting config.cache_size_limit="
                        f"{self.config.cache_size_limit}; it now runs eagerly. Last failing guard: {failed_text}. "
                        "Make this input's type/shape/value stable, or raise cache_size_limit."), stacklevel=4)
                return None
        try:
            entry = compile_frame(Frame(fn, L, G, C), self)
        except (GraphBreakError, BackendCompilerError):
            raise
        except UserCodeError:
            return None
        except CannotResume as error:
            if self.nopython:
                raise InternalCaptureError(str(error)) from None
            state.eager_reason = str(error)
            if error.call_site is not None:
                index, null_below = error.call_site
                state.eager_code = eager_code_with_captured_call(code, index, null_below, self.wrap_traced_callee)
            log.info("capture: %s", error)
            return None
        except Exception as error:
            if not self.config.fallback_on_internal_error:
                raise InternalCaptureError(f"capture failed on {code.co_name}: {error}") from error
            state.eager_reason = f"internal error: {type(error).__name__}: {error}"
            log.warning("capture: falling back to eager for %s (%s:%s): %s: %s", code.co_name,
                        code.co_filename, code.co_firstlineno, type(error).__name__, error)
            warnings.warn(f"capture: internal error while compiling {code.co_name} ({code.co_filename}:"
                          f"{code.co_firstlineno}): {type(error).__name__}: {error}; it runs eagerly",
                          RuntimeWarning, stacklevel=4)
            return None
        state.entries.append(entry)
        return entry
