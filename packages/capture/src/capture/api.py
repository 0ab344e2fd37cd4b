"""The public entry points: optimize, disable, run, reset, graph_break and friends."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from capture.cache import DEFAULT_CACHE, FROZEN, CompilerFn
from capture.config import CaptureConfig, config
from capture.context import CaptureContext, OptimizedModule, module_call, wrap_for_capture
from capture.errors import CaptureError
from capture.events import CaptureHooks
from capture.registry import MARKS

F = TypeVar("F", bound=Callable[..., Any])


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
        wrapped_module = OptimizedModule(module, module_call(module, ctx))

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
