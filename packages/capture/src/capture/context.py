"""The call path: `CaptureContext` and the capturing wrappers it makes.

`CaptureContext` bundles what one `optimize(...)` call configured: backend, nopython, config, hooks and
the cache it uses; every wrapper it makes (`CapturedFunction` for a function, `OptimizedModule` for an
nn.Module, `wrap_for_capture` for any callable; resume functions too) shares it. A call goes through the
code cache (`cache.py`): a passing entry runs, else the frame is compiled (`convert_frame.py`).
"""

from __future__ import annotations

import functools
import logging
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any, cast

import torch
from torch.overrides import _get_current_function_mode_stack
from torch.utils._device import DeviceContext

from capture import cache as code_cache
from capture.bytecode.codegen import ORIGINS, resume_code
from capture.bytecode.eager_calls import eager_code_with_captured_call
from capture.cache import (
    DEFAULT_CACHE,
    FROZEN,
    CodeCache,
    CodeState,
    CompilerFn,
    bind_frame_arguments,
    run_eagerly,
)
from capture.config import CaptureConfig
from capture.convert_frame import CannotResume, Frame, UserCodeError, compile_frame
from capture.distributed import (
    data_parallel_call,
    forward_replaced,
    has_keyword_hooks,
    is_data_parallel,
    with_hooked_submodules_captured,
)
from capture.errors import (
    BackendCompilerError,
    CaptureError,
    GraphBreakError,
    InternalCaptureError,
    RecompileLimitWarning,
    RecompileStormWarning,
)
from capture.events import CaptureHooks, Recompiled
from capture.guards import failing_values, first_failure
from capture.libraries import is_stdlib_or_skipped
from capture.module_wrapper import OptimizedModule
from capture.symbolic.run_time_values import RunTimePaths
from capture.variables.base import class_attribute

log = logging.getLogger("capture")


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
        if getattr(value, "_kiln_original", None) is not None or getattr(value, "_kiln_disabled", False):
            return value
        if isinstance(value, torch.nn.RNNBase):
            # A recurrent layer breaks the graph only to run eagerly whole (a long sequence, CPU
            # autocast): its forward would break again on every weakref and on the op itself.
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
                        null_slots: frozenset[int] = frozenset(), data_paths: RunTimePaths | None = None) -> Any:
        """The captured resume function at instruction `target` of `code` (`null_slots`: stack positions of NULLs;
        `data_paths`: where its arguments hold run-time data, see `CodeState.data_arguments`).

        A function with free variables gets a `ClosureResume`: the entry is reused by every later call
        whose guards pass, each of those functions with its own cells (a closure made anew on each call
        of the function defining it), so the stub binds the resume code to the closure of its own call.
        """
        key = (code, target, depth, names, null_slots, id(f_globals), closure is None, self.backend_key)
        wrapper = self.cache.resume_wrappers.get(key)
        rcode = resume_code(code, target, depth, names, null_slots)
        if data_paths is not None:
            state = self.cache.state(rcode, self)
            state.data_arguments.update(data_paths.data)
            state.varying_data.update(data_paths.varying)
            state.number_arguments.update(data_paths.numbers)
        if wrapper is None:
            if closure is not None:
                wrapper = ClosureResume(rcode, f_globals, self)
            else:
                fn = types.FunctionType(rcode, f_globals, rcode.co_name, None, None)
                wrapper = self.wrap_function(fn)
                wrapper._kiln_keepalive = (f_globals, fn)
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

    def _report_recompile(self, code: types.CodeType, state: CodeState, L: Any, G: Any, C: Any, storm: bool) -> str:
        """Tell the hooks (and the log) which guard of the last entry failed, its value, and its line; on a
        `storm` (recompiling again for inputs of the same metadata) warn once with the same."""
        guard_set = state.entries[-1].guard_set
        failed = first_failure(guard_set, L, G, C)
        failed_text = str(failed) if failed is not None else "unknown guard"
        if failed is not None:
            state.note_failed_guard(failed.kind, failed.source_expr)
        if self.dynamic is not False and not self.export:  # automatic dynamic for int and float arguments
            state.note_changed_numbers(guard_set.constant_values, L)
        values = failing_values(guard_set, failed, L, G, C) if failed is not None else ""
        location = failed.location if failed is not None else None
        self.hooks.recompile(Recompiled(code.co_name, code.co_filename, code.co_firstlineno, failed_text,
                                        len(state.entries), failed, values, location))
        where = f" (guard installed at {failed.where()})" if failed is not None and failed.where() else ""
        log.info("capture: recompiling %s: guard failed: %s; now %s%s", code.co_name, failed_text, values, where)
        origin = ORIGINS.get(code)  # once per user function, whichever of its resume functions storms
        root_state = self.cache.state(origin.original, self) if origin is not None else state
        if storm and not root_state.storm_warned:
            root_state.storm_warned = True
            # Shown at the user's line that installed the guard (else the function's first line).
            warnings.warn_explicit(RecompileStormWarning(
                f"capture: {code.co_name} ({code.co_filename}:{code.co_firstlineno}) keeps recompiling (a recompile "
                f"storm): {state.same_input_recompiles + 1} compiles for calls whose inputs have the same types, shapes "
                f"and dtypes. Failing guard: {failed_text}; now {values or '?'}{where}. A value it reads changes between "
                "calls: pass it as a tensor, or keep it out of the compiled function (capture.disable)."),
                RecompileStormWarning, location.filename if location is not None else code.co_filename,
                location.lineno if location is not None else code.co_firstlineno)
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
        code = fn.__code__
        G, C = fn.__globals__, fn.__closure__
        if not code_cache.python_supported():  # looked up on the module: tests stand in another Python
            state.eager_reason = code_cache.UNSUPPORTED_PYTHON
            if self.nopython:
                raise InternalCaptureError(code_cache.UNSUPPORTED_PYTHON)
            code_cache.warn_unsupported_python()
            return None
        storm = state.note_compile(L)
        if state.entries:
            failed_text = self._report_recompile(code, state, L, G, C, storm)
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


_functorch_transforms_active = torch._C._are_functorch_transforms_active
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._len_torch_function_stack


def _user_function_modes() -> bool:
    """Whether a TorchFunctionMode other than `with torch.device(...)` is active (capture reads the
    default device itself)."""
    return any(not isinstance(mode, DeviceContext) for mode in _get_current_function_mode_stack())


class CapturedFunction:
    """A Python function whose calls go through capture's code cache."""

    def __init__(self, fn: types.FunctionType, ctx: CaptureContext) -> None:
        self._kiln_original = fn
        self._ctx = ctx
        code = fn.__code__
        # The fast path takes positional arguments as the frame's arguments directly.
        self._simple_arity = code.co_argcount if not (code.co_flags & 0x0C or code.co_kwonlyargcount) else -1
        self._state: Any = None
        self._generation = -1
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _functorch_transforms_active() or _dispatch_modes() or (_function_modes() and _user_function_modes()):
            # Under torch.func (vmap, grad, jacrev...) the arguments are functorch's wrapper tensors:
            # no fake tensor describes them, and compiled kernels cannot read their memory. A user's
            # TorchFunctionMode or TorchDispatchMode sees (and may change) every op, which compiled
            # kernels never show it. In all these the original function runs, as in eager.
            return self._kiln_original(*args, **kwargs)
        ctx = self._ctx
        if not kwargs and len(args) == self._simple_arity and self._generation == ctx.cache.generation:
            fn = self._kiln_original
            G, C = fn.__globals__, fn.__closure__
            for entry in self._state.entries:
                if entry.check(args, G, C):
                    return entry.run(args, G, C)
        else:
            self._state = ctx.cache.state(self._kiln_original.__code__, ctx)
            self._generation = ctx.cache.generation
        return ctx.call(self._kiln_original, args, kwargs)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        return types.MethodType(self, instance)

    def __repr__(self) -> str:
        return f"<captured {self._kiln_original.__qualname__}>"


class ClosureResume:
    """The resume function of a code object with free variables, bound to each call's closure.

    `bind(closure)` is the captured function of the resume code over those cells (the last one is
    kept: calls of one closure in a row, a loop's, share it); its compiled entries are the code's.
    """

    def __init__(self, code: types.CodeType, f_globals: dict[str, Any], ctx: CaptureContext) -> None:
        self.code = code
        self.f_globals = f_globals
        self.ctx = ctx
        self._bound: tuple[Any, Any] = (None, None)

    def bind(self, closure: tuple[Any, ...]) -> Any:
        """The captured resume function over `closure` (the cells of the call that broke)."""
        bound = self._bound  # one read: another thread may rebind it
        if bound[0] is closure:
            return bound[1]
        fn = types.FunctionType(self.code, self.f_globals, self.code.co_name, None, closure)
        wrapper = CapturedFunction(fn, self.ctx)
        self._bound = (closure, wrapper)
        return wrapper


def captured_forward(module: torch.nn.Module, ctx: CaptureContext) -> Callable[..., Any]:
    """`module`'s forward, captured (no hooks run); submodules whose hooks take keyword arguments
    (FSDP2's) run their hooks eagerly, their forward captured."""
    forward = module.__dict__.get("forward")
    if forward is not None:
        captured: Any = wrap_for_capture(forward, ctx)
    else:
        class_forward: Any = type(module).forward
        captured = functools.partial(ctx.wrap_function(class_forward), module)
    return with_hooked_submodules_captured(module, captured, lambda sub: captured_forward(sub, ctx))


def module_call(module: torch.nn.Module, ctx: CaptureContext) -> Callable[..., Any]:
    """What calling `module`'s compiled wrapper runs: its captured forward, with the module's forward
    hooks and pre-hooks run around it."""
    captured = captured_forward(module, ctx)

    def call_module(*args: Any, **kwargs: Any) -> Any:
        if not (module._forward_hooks or module._forward_pre_hooks):
            return captured(*args, **kwargs)
        if has_keyword_hooks(module):
            # Hooks taking keyword arguments (FSDP2's): nn.Module's own call runs them around the captured forward.
            with forward_replaced(module, captured):
                return module(*args, **kwargs)
        for hook in list(module._forward_pre_hooks.values()):
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = captured(*args, **kwargs)
        for hook in list(module._forward_hooks.values()):
            result = hook(module, args, output)
            if result is not None:
                output = result
        return output

    return call_module


def _calling(builtin: Callable[..., Any]) -> types.FunctionType:
    """A Python function that calls `builtin` (``torch.sin``, ``F.gelu``): capture traces bytecode, and a
    function written in C has none; the call inside is traced as any call of it."""

    def call_builtin(*args: Any, **kwargs: Any) -> Any:
        return builtin(*args, **kwargs)

    # A code object per callable: capture keeps compiled entries per code object, and one shared by
    # every wrapped builtin would reach the recompile limit after a few of them.
    name = "call_" + "".join(c if c.isalnum() else "_" for c in getattr(builtin, "__qualname__", type(builtin).__name__))
    call_builtin.__code__ = call_builtin.__code__.replace(co_name=name, co_qualname=name)
    return cast(types.FunctionType, call_builtin)  # a `def`: mypy types it as a plain callable


def wrap_for_capture(target: Any, ctx: CaptureContext) -> Any:
    """The capturing wrapper for a function, bound method, nn.Module or callable object."""
    if isinstance(target, OptimizedModule):
        target = target._orig_mod
    elif isinstance(target, CapturedFunction):
        target = target._kiln_original
    if isinstance(target, torch.nn.Module):
        if is_data_parallel(target):  # DDP's forward runs eagerly, the module it wraps is captured
            return OptimizedModule(target, data_parallel_call(target, captured_forward(cast(torch.nn.Module, target.module), ctx)))
        return OptimizedModule(target, module_call(target, ctx))
    if isinstance(target, types.MethodType):
        return types.MethodType(wrap_for_capture(target.__func__, ctx), target.__self__)
    if isinstance(target, types.FunctionType):
        return ctx.wrap_function(target)
    call_method = class_attribute(type(target), "__call__")
    if isinstance(call_method, types.FunctionType):
        return types.MethodType(ctx.wrap_function(call_method), target)
    if callable(target):  # written in C (torch.sin, F.gelu, Tensor.relu) or a callable without Python __call__
        return functools.wraps(target)(ctx.wrap_function(_calling(target)))
    raise CaptureError(f"capture.optimize expects a function, an nn.Module or a callable, got {type(target).__name__}")
