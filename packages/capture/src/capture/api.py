"""The public entry points: optimize, disable, run, reset, graph_break and friends."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch.overrides import _get_current_function_mode_stack
from torch.utils._device import DeviceContext

from capture.cache import DEFAULT_CACHE, FROZEN, CaptureContext, CompilerFn
from capture.config import CaptureConfig, config
from capture.distributed import (
    DataParallelModule,
    forward_replaced,
    has_keyword_hooks,
    is_data_parallel,
    with_hooked_submodules_captured,
)
from capture.errors import CaptureError
from capture.events import CaptureHooks
from capture.registry import MARKS
from capture.variables.base import class_attribute

F = TypeVar("F", bound=Callable[..., Any])


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


class OptimizedModule:
    """Behaves like the wrapped nn.Module; calling it runs the captured forward.

    Attribute reads and writes, `state_dict()`, `parameters()`, `to()` ... go to the original
    module (`_orig_mod`); `train()`/`eval()` switch the original and return this wrapper.
    """

    def __init__(self, module: torch.nn.Module, ctx: CaptureContext) -> None:
        forward = module.__dict__.get("forward")
        if forward is not None:
            captured: Any = wrap_for_capture(forward, ctx)
        else:
            class_forward: Any = type(module).forward
            captured = functools.partial(ctx.wrap_function(class_forward), module)
        # Submodules whose hooks take keyword arguments (FSDP2's) run their hooks eagerly, their forward captured.
        captured = with_hooked_submodules_captured(module, captured, lambda sub: OptimizedModule(sub, ctx).forward)
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_kiln_original", module)
        object.__setattr__(self, "_ctx", ctx)
        object.__setattr__(self, "forward", captured)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        module: torch.nn.Module = self._orig_mod
        if not (module._forward_hooks or module._forward_pre_hooks):
            return self.forward(*args, **kwargs)
        if has_keyword_hooks(module):
            # Hooks taking keyword arguments (FSDP2's): nn.Module's own call runs them around the captured forward.
            with forward_replaced(module, self.forward):
                return module(*args, **kwargs)
        for hook in list(module._forward_pre_hooks.values()):
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in list(module._forward_hooks.values()):
            result = hook(module, args, output)
            if result is not None:
                output = result
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_orig_mod"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._orig_mod, name, value)

    def __dir__(self) -> list[str]:
        return dir(self._orig_mod)

    def train(self, mode: bool = True) -> OptimizedModule:
        """Set training mode on the original module."""
        self._orig_mod.train(mode)
        return self

    def eval(self) -> OptimizedModule:
        """Set eval mode on the original module."""
        self._orig_mod.eval()
        return self

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"


def _calling(builtin: Callable[..., Any]) -> types.FunctionType:
    """A Python function that calls `builtin` (``torch.sin``, ``F.gelu``): capture traces bytecode, and a
    function written in C has none; the call inside is traced as any call of it."""

    def call_builtin(*args: Any, **kwargs: Any) -> Any:
        return builtin(*args, **kwargs)

    # A code object per callable: capture keeps compiled entries per code object, and one shared by
    # every wrapped builtin would reach the recompile limit after a few of them.
    name = "call_" + "".join(c if c.isalnum() else "_" for c in getattr(builtin, "__qualname__", type(builtin).__name__))
    call_builtin.__code__ = call_builtin.__code__.replace(co_name=name, co_qualname=name)
    return call_builtin


def wrap_for_capture(target: Any, ctx: CaptureContext) -> Any:
    """The capturing wrapper for a function, bound method, nn.Module or callable object."""
    if isinstance(target, (OptimizedModule, DataParallelModule)):
        target = target._orig_mod
    elif isinstance(target, CapturedFunction):
        target = target._kiln_original
    if isinstance(target, torch.nn.Module):
        if is_data_parallel(target):  # DDP's forward runs eagerly, the module it wraps is captured
            return DataParallelModule(target, OptimizedModule(target.module, ctx).forward)
        return OptimizedModule(target, ctx)
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


class _Optimizer:
    """What `optimize(...)` returns: a decorator."""

    def __init__(self, ctx: CaptureContext) -> None:
        self.ctx = ctx

    def __call__(self, target: F) -> F:
        result: F = wrap_for_capture(target, self.ctx)
        return result

    def __enter__(self) -> None:
        raise CaptureError("capture.optimize(...) cannot be used as a context manager: pure-Python capture has no "
                           "frame hook. Decorate the function instead: optimize(backend)(fn).")

    def __exit__(self, *exc: Any) -> None:
        return None


def _eager_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return gm.forward


def optimize(backend: CompilerFn | str, *, nopython: bool = False, dynamic: bool | None = None,
             hooks: CaptureHooks | None = None, config: CaptureConfig | None = None) -> _Optimizer:
    """Decorator that captures functions and nn.Modules into FX graphs compiled by `backend`.

    Args:
        backend: ``backend(gm, example_inputs) -> callable``; the string "eager" runs graphs as they are.
        nopython: raise `GraphBreakError` (with the user's file:line) instead of splitting graphs.
        dynamic: True: sizes of the argument tensors are symbols (one graph for all sizes, guarded
            only on the relations the code relies on); False: every size is specialized (a new
            size recompiles; `mark_dynamic` still counts); None (default): specialize first, and
            when a size changes and the function recompiles, make that dim dynamic (automatic
            dynamic). Sizes 0 and 1 are always specialized. See docs/dynamic-shapes.md.
        hooks: observers of compiled graphs, graph breaks and recompilations.
        config: settings (defaults to `capture.config`).

    Example::

        @capture.optimize(my_backend)
        def f(x, y):
            return torch.sin(x) + torch.cos(y)
    """
    if isinstance(backend, str):
        if backend != "eager":
            raise CaptureError(f"capture.optimize knows only the 'eager' backend by name, not {backend!r}; "
                               "pass a callable backend(gm, example_inputs), or use frontend.compile")
        backend = _eager_backend
    if dynamic not in (True, False, None):
        raise CaptureError(f"dynamic must be True, False or None, got {dynamic!r}")
    return _Optimizer(CaptureContext(backend, nopython=nopython, config=config or _default_config(), hooks=hooks,
                                     dynamic=dynamic))


def _default_config() -> CaptureConfig:
    return config


def disable(fn: F | None = None, *, recursive: bool = True) -> Any:
    """Run `fn` without capture; inside captured code a call to it is a graph break.

    Usable as ``@disable``, ``@disable(recursive=False)`` or ``disable(fn)``. Pure-Python capture
    cannot hook the frames `fn` calls, so `recursive=False` behaves like `recursive=True`.
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    original = getattr(fn, "_kiln_original", fn)
    if isinstance(original, torch.nn.Module):
        return original

    @functools.wraps(original)
    def disabled(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    disabled._kiln_disabled = True  # type: ignore[attr-defined]
    return disabled


def graph_break() -> None:
    """Inside captured code: end the graph here (a no-op when running eagerly)."""


graph_break._kiln_graph_break = True  # type: ignore[attr-defined]


def allow_in_graph(fn: F) -> F:
    """Put calls to `fn` into the graph as one node (it must be traceable with fake tensors)."""
    MARKS.allow(fn)
    return fn


def disallow_in_graph(fn: F) -> F:
    """Make calls to `fn` graph breaks (they run in plain Python)."""
    MARKS.disallow(fn)
    return fn


def _mark(tensor: torch.Tensor, dim: int | list[int] | tuple[int, ...], attribute: str, what: str) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise CaptureError(f"{what} expects a tensor, got {type(tensor).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    for d in dims:
        if not isinstance(d, int) or not -tensor.dim() <= d < tensor.dim():
            raise CaptureError(f"{what}: dim {d!r} is out of range for a tensor with {tensor.dim()} dims")
    marked: set[int] = set(getattr(tensor, attribute, set()))
    marked.update(d % tensor.dim() for d in dims)
    setattr(tensor, attribute, marked)


def mark_dynamic(tensor: torch.Tensor, dim: int | list[int] | tuple[int, ...]) -> None:
    """Make `tensor`'s dim(s) symbolic in the next compile that sees this tensor, whatever `dynamic=` says.

    Example: ``capture.mark_dynamic(x, 0)`` before calling a compiled function on ``x`` compiles one
    graph for every batch size (sizes 0 and 1 still get their own graph).
    """
    _mark(tensor, dim, "_kiln_dynamic_dims", "mark_dynamic")


def mark_static(tensor: torch.Tensor, dim: int | list[int] | tuple[int, ...]) -> None:
    """Keep `tensor`'s dim(s) specialized, even under ``dynamic=True`` or automatic dynamic."""
    _mark(tensor, dim, "_kiln_static_dims", "mark_static")


def reset() -> None:
    """Forget every compiled entry (use after changing backends, as the seeds do)."""
    DEFAULT_CACHE.clear()


def run(fn: F) -> F:
    """Run `fn` with the entries already compiled for it, never compiling (eager on a miss)."""
    target = getattr(fn, "_kiln_original", fn)
    if isinstance(target, torch.nn.Module):
        module = target
        code = type(module).forward.__code__
        states = DEFAULT_CACHE.states_for(code)
        if not states or states[0].ctx is None:
            return fn
        ctx = states[0].ctx
        wrapped_module = OptimizedModule(module, ctx)

        def run_module(*args: Any, **kwargs: Any) -> Any:
            token = FROZEN.set(True)
            try:
                return wrapped_module(*args, **kwargs)
            finally:
                FROZEN.reset(token)

        return run_module  # type: ignore[return-value]
    if not isinstance(target, types.FunctionType):
        return fn
    states = DEFAULT_CACHE.states_for(target.__code__)
    ctx_found = states[0].ctx if states else None

    @functools.wraps(target)
    def frozen(*args: Any, **kwargs: Any) -> Any:
        if ctx_found is None:
            return target(*args, **kwargs)
        token = FROZEN.set(True)
        try:
            return ctx_found.call(target, args, kwargs)
        finally:
            FROZEN.reset(token)

    return frozen  # type: ignore[return-value]
