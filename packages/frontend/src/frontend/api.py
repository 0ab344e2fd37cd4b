"""`frontend.compile` and `frontend.optimize`: capture a function or module and compile its graphs.

The driver, top to bottom: validate the arguments; snapshot the configuration with ``mode`` and
``options`` applied; look the backend up; bind it to a `CompileContext`; hand it to capture, which
calls it once per captured graph. For an `nn.Module` the compiled forward is wrapped in an
`OptimizedModule` that shares the original's state.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

import capture
from capture import OptimizedModule
from frontend.backends.registry import ContextBackend, lookup_backend
from frontend.capture_events import build_capture_hooks
from frontend.config import Config, config
from frontend.context import CompileContext
from frontend.diagnostics import watched_graph
from frontend.distributed import split_at_ddp_buckets
from frontend.errors import InvalidOptionError

MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    "max-autotune": {"max_autotune": True, "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
}
"""Each mode is a set of config options applied before ``options=``."""


class BoundBackend:
    """The ``(gm, example_inputs)`` compiler capture calls: a backend bound to its context."""

    def __init__(self, backend: ContextBackend, context: CompileContext, name: str = "backend") -> None:
        self.backend = backend
        self.context = context
        self.__name__ = name  # how capture's error messages name the backend

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        context = self.context
        context.graphs_compiled += 1
        context.times.graphs += 1
        started = time.perf_counter()
        artifacts = context.new_artifacts()
        if artifacts is not None:
            artifacts.write_graph("fx_graph.py", gm)
        with watched_graph(context, gm, example_inputs, self.__name__):
            compiled = self.backend(gm, example_inputs, context)
        if context.repro is not None:
            compiled = context.repro.checked(gm, compiled)  # the accuracy level compares its first call with eager
        if context.events.wants("compile"):
            ops = sum(1 for node in gm.graph.nodes if node.op in ("call_function", "call_method", "call_module"))
            context.events.emit(
                "compile",
                f"{context.label}: graph {context.graphs_compiled} ({ops} ops, {len(example_inputs)} inputs) "
                f"compiled in {time.perf_counter() - started:.3f}s",
            )
        return compiled


def resolve_config(backend: Any, mode: str | None, options: Mapping[str, Any] | None, base: Config) -> Config:
    """`base` with `mode`'s and then `options`' settings applied, after validating both."""
    if mode is not None and mode not in MODES:
        raise InvalidOptionError(f"unknown mode {mode!r}; valid modes are: {', '.join(MODES)} (or None)")
    if mode not in (None, "default") and backend != "inductor":
        raise InvalidOptionError(
            f"mode={mode!r} applies to the 'inductor' backend only, not backend={backend!r}; "
            "drop mode= or use backend='inductor'"
        )
    merged: dict[str, Any] = dict(MODES.get(mode or "default", {}))
    merged.update(options or {})
    return base.with_options(merged)


def _label(model: Any) -> str:
    if isinstance(model, nn.Module):
        return type(model).__name__
    return str(getattr(model, "__qualname__", None) or getattr(model, "__name__", None) or type(model).__name__)


def capture_optimize(
    compiler: Callable[..., Any],
    *,
    nopython: bool,
    dynamic: bool | None,
    hooks: capture.CaptureHooks | None,
    config: capture.CaptureConfig | None = None,
) -> Callable[..., Any]:
    """capture's decorator for `compiler` (capture.optimize), reporting to `hooks`, with capture's `config`."""
    kwargs: dict[str, Any] = {"nopython": nopython, "config": config}
    if dynamic is not None:
        kwargs["dynamic"] = dynamic
    if hooks is not None:
        kwargs["hooks"] = hooks
    return capture.optimize(compiler, **kwargs)  # type: ignore[no-any-return]


def compile(
    model: Callable[..., Any] | nn.Module | None = None,
    *,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    options: Mapping[str, Any] | None = None,
    disable: bool = False,
) -> Any:
    """Compile a function or `nn.Module` with Kiln; the result is called like the original.

    Args:
        model: the function or module; omit it to get a decorator (``@frontend.compile(...)``).
        backend: a registered name (see `list_backends()`: "inductor", "aot_eager", "eager",
            "cudagraphs", ...) or a callable ``(gm, example_inputs) -> callable``.
        mode: None/"default", "reduce-overhead" (CUDA graph replay), "max-autotune" (wider
            autotuning, with CUDA graphs) or "max-autotune-no-cudagraphs".
        fullgraph: require one graph for the whole function: a graph break raises, naming the
            line in your code that caused it.
        dynamic: passed to capture. True: the sizes of the input tensors are symbols, one graph
            (and one kernel set) serves every size; False: every size is specialized (a new size
            recompiles); None: specialize first, and make a dim dynamic once its size changes
            (automatic dynamic). `mark_dynamic`/`mark_static` override it per tensor dim.
            Sizes 0 and 1 are always specialized. See docs/dynamic-shapes.md.
        options: `Config` fields (e.g. ``{"fallback_to_eager": False}``) and each stage's own
            options by a dotted name: ``"capture.<name>"`` (`capture.CaptureConfig`),
            ``"aotgrad.<name>"`` (`aotgrad.AotConfig`), ``"inductor_ir.<name>"``
            (`inductor_ir.InductorIRConfig`), ``"<device>.<name>"`` for a device's kernel backend
            (``"cpu.vectorize"``: `codegen_cpp.CppConfig`; ``"cuda.max_configs"``:
            `codegen_triton.TritonConfig`). Unknown keys raise with the list of valid ones. With
            `mode`, the mode's settings apply first and `options` override them
            (``mode="reduce-overhead", options={"cudagraph_copy_outputs": False}``); torch.compile
            rejects the pair, Kiln layers them.
        disable: return `model` unchanged (to switch compilation off with one flag).

    Returns:
        For a function, a function; for a module, an `OptimizedModule` sharing its state. Either
        carries ``kiln_context`` (a `CompileContext`): ``graphs_compiled``, ``graph_breaks``,
        ``recompilations`` and ``kernels`` (each generated kernel's name and fused op count) so far.

    Example::

        @frontend.compile
        def f(x, y):
            return torch.sin(x) + torch.cos(y)
    """
    if model is None:

        def decorate(inner: Any) -> Any:
            return compile(
                inner, backend=backend, mode=mode, fullgraph=fullgraph, dynamic=dynamic, options=options, disable=disable
            )

        return decorate
    if not callable(model):
        raise TypeError(f"frontend.compile expects a function or an nn.Module, got {type(model).__name__}")
    if not isinstance(fullgraph, bool):
        raise TypeError(f"fullgraph must be True or False, got {fullgraph!r}")
    if isinstance(model, OptimizedModule):  # compiling a compiled module again: start from the original
        model = model.original
    resolved = resolve_config(backend, mode, options, config)
    compiler = lookup_backend(backend)
    if disable:
        return model
    context = CompileContext.for_config(resolved, _label(model))
    bound = BoundBackend(compiler, context, backend if isinstance(backend, str) else getattr(backend, "__name__", "backend"))
    listener = getattr(backend, "on_capture_event", None)  # e.g. a CompileProfiler
    hooks = build_capture_hooks(context, [listener] if callable(listener) else [])
    graph_compiler = split_at_ddp_buckets(bound, model, context)  # under DDP: a subgraph per gradient bucket
    decorator = capture_optimize(
        graph_compiler, nopython=fullgraph, dynamic=dynamic, hooks=hooks, config=resolved.capture_config()
    )
    if isinstance(model, nn.Module):
        # capture's module wrapper: the module's state, its forward hooks around the captured forward.
        wrapper = decorator(model)
        object.__setattr__(wrapper, "kiln_context", context)
        return wrapper
    compiled = decorator(model)
    try:
        compiled.kiln_context = context  # graphs, breaks and recompilations of this compiled function
    except (AttributeError, TypeError):
        pass
    if compiled is not model and not hasattr(compiled, "__wrapped__"):
        try:
            functools.update_wrapper(compiled, model)
        except (AttributeError, TypeError):
            pass  # a callable object that takes no attributes: still usable, just less introspectable
    return compiled


class _Optimizer:
    """What `optimize` returns: a decorator (not a context manager: capture has no frame hook)."""

    def __init__(self, backend: str | Callable[..., Any], nopython: bool, dynamic: bool | None) -> None:
        self.backend = backend
        self.nopython = nopython
        self.dynamic = dynamic

    def __call__(self, model: Any) -> Any:
        return compile(model, backend=self.backend, fullgraph=self.nopython, dynamic=self.dynamic)

    def __enter__(self) -> None:
        raise TypeError(
            "frontend.optimize(...) is a decorator, not a context manager: Kiln captures the functions "
            "you decorate. Write `fn = frontend.optimize(backend)(fn)` (or `@frontend.optimize(backend)`)."
        )

    def __exit__(self, *exc: object) -> None:
        return None


def optimize(
    backend: str | Callable[..., Any] = "inductor", nopython: bool = False, dynamic: bool | None = None
) -> Callable[[Any], Any]:
    """A decorator compiling functions and modules with `backend`, as in the seed tutorial.

    ``frontend.optimize("inductor")(fn)`` is ``frontend.compile(fn, backend="inductor")``;
    ``nopython=True`` is ``fullgraph=True``.
    """
    lookup_backend(backend)  # an unknown name fails here, not at the first call
    return _Optimizer(backend, nopython, dynamic)
