"""One captured graph's trip through the graph cache: look it up, restore it, or save it once it ran.

The inductor backend calls `CachedCompile.start` before compiling a graph. On a hit, `restore`
rebuilds aotgrad's regions from the entry's plans (`aotgrad.plans`) with every compiled graph loaded
by the kernel backends (`runners.load_runner`): no tracing, lowering, code generation or compiling.
On a miss the graph is compiled as usual and `save_after_first_call` wraps the result: after its
first call has run compiled, its plans are written (a graph that fell back to eager is not saved).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aotgrad.plans import NotPlannable, RegionPlan, aot_graph_from_plans, export_plans
from frontend.context import CompileContext
from frontend.graph_cache.codec import encode_entry
from frontend.graph_cache.key import graph_key, key_components, shape_env_of
from frontend.graph_cache.runners import export_runner, load_runner
from frontend.graph_cache.store import GraphStore, warn_once

__all__ = ["CachedCompile", "GraphEntry", "store_for"]

_STORES: dict[str, GraphStore] = {}
"""One store per cache folder in this process (entries read or written are remembered there)."""


def store_for(cache_dir: Path | str) -> GraphStore:
    """The process's store of the cache folder `cache_dir`."""
    name = str(cache_dir)
    if name not in _STORES:
        _STORES[name] = GraphStore(Path(name))
    return _STORES[name]


def all_stores() -> list[GraphStore]:
    """Every store this process has used."""
    return list(_STORES.values())


@dataclass(frozen=True)
class GraphEntry:
    """What the cache keeps for one captured graph: its key, its compiled regions' plans, and the
    size checks compiling added (`size_checks`).

    The key holds the guards on sizes known before compiling; compiling can add more (a symbolic
    size specialized to 3 by an op's rule): such an entry fits only inputs that pass them too, and
    one compiled after such a check failed has the same key.
    """

    key: str
    plans: tuple[RegionPlan, ...]
    size_checks: tuple[str, ...] = ()


def _size_checks(shape_env: Any) -> tuple[str, ...]:
    """The ShapeEnv's guards as Python expressions over its size symbols (after compiling)."""
    if shape_env is None:
        return ()
    from torch.utils._sympy.printers import PythonPrinter

    printer = PythonPrinter()
    return tuple(sorted({printer.doprint(guard.expr) for guard in getattr(shape_env, "guards", ())}))


_CHECK_BUILTINS: dict[str, Any] = {"__builtins__": {f.__name__: f for f in (abs, min, max, int, float, round, bool)}}


def _size_checks_hold(checks: Sequence[str], shape_env: Any) -> bool:
    """Whether the example sizes pass every check (False when one cannot be evaluated)."""
    if not checks:
        return True
    if shape_env is None:
        return False
    values: dict[str, Any] = {str(symbol): int(value) for symbol, value in getattr(shape_env, "var_to_val", {}).items()}
    values["math"] = math
    for check in checks:
        try:
            if not eval(check, _CHECK_BUILTINS, values):  # the cache's own text: see `_size_checks`
                return False
        except Exception:
            return False
    return True


def _graph_count(plans: Sequence[RegionPlan]) -> int:
    """How many compiled graphs `plans` hold: a forward each, and a backward for training."""
    return sum(2 if plan.training is not None else 1 for plan in plans)


def _kernel_library_counts(backends: Mapping[str, Any]) -> tuple[int, int]:
    """(libraries taken from the kernel cache, libraries asked for) so far, over `backends`."""
    hits = total = 0
    for backend in backends.values():
        stats = getattr(getattr(backend, "inner", backend), "stats", None)
        hits += int(getattr(stats, "cache_hits", 0))
        total += int(getattr(stats, "libraries", 0))
    return hits, total


class CachedCompile:
    """The graph cache's view of one graph being compiled (see the module docstring)."""

    def __init__(self, key: str, store: GraphStore, context: CompileContext, backends: Mapping[str, Any]) -> None:
        self.key = key
        self.store = store
        self.context = context
        self.backends = backends
        self._kernels_before = _kernel_library_counts(backends)
        self.shape_env: Any = None  # the example inputs' (set by `start`)

    @classmethod
    def start(
        cls,
        gm: torch.fx.GraphModule,
        example_inputs: Sequence[Any],
        context: CompileContext,
        backends: Mapping[str, Any],
        device_type: str,
    ) -> CachedCompile | None:
        """The cache's handle on this graph, or None when the cache is off for it.

        Off: ``graph_cache=False`` (KILN_GRAPH_CACHE=0), under ``debug`` and while repro scripts
        are recorded (every stage must run to show its artifacts), and under CUDA graph replay
        (its recordings are per process).
        """
        config = context.config
        if not config.graph_cache or config.debug or config.cudagraphs or getattr(context, "repro", None) is not None:
            return None
        try:
            with context.stage("cache"):
                key = graph_key(key_components(gm, example_inputs, config, backends, device_type))
        except Exception as error:  # a graph the key cannot describe is compiled, not cached
            warn_once("graph-cache-key", f"Kiln's graph cache skips a graph it cannot key ({type(error).__name__}: {error})")
            return None
        cached = cls(key, store_for(config.cache_dir), context, backends)
        cached.shape_env = shape_env_of(example_inputs)
        return cached

    def restore(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **aot_options: Any) -> Callable[..., Any] | None:
        """The compiled graph rebuilt from its entry, or None on a miss (or an entry that fails to load).

        `aot_options` are `aot_graph`'s compilers and decompositions, for regions the entry lacks.
        """
        times = self.context.times
        with self.context.stage("cache"):
            entry = self.store.read(self.key)
            restored = None
            if isinstance(entry, GraphEntry) and not _size_checks_hold(entry.size_checks, self.shape_env):
                entry = None  # compiled for sizes these inputs do not have: compiled again (and saved over it)
            if isinstance(entry, GraphEntry):
                try:
                    restored = aot_graph_from_plans(
                        gm, example_inputs, entry.plans, lambda saved: load_runner(saved, self.backends), **aot_options
                    )
                except Exception as error:
                    warn_once(
                        "graph-cache-load",
                        f"Kiln's graph cache entry {self.store.path(self.key)} could not be loaded "
                        f"({type(error).__name__}: {error}); the graph is compiled again (shown once per process).",
                    )
                    self.store.forget(self.key)
        times.count_cache("graph", restored is not None)
        if restored is None or not isinstance(entry, GraphEntry):
            return None
        times.count_cache("aotgrad", True, len(entry.plans))
        times.count_cache("inductor", True, _graph_count(entry.plans))
        self._count_kernels()
        return restored

    def _count_kernels(self) -> None:
        hits, total = _kernel_library_counts(self.backends)
        before_hits, before_total = self._kernels_before
        new_hits, new_total = hits - before_hits, total - before_total
        if new_total:
            self.context.times.count_cache("kernels", True, new_hits)
            self.context.times.count_cache("kernels", False, new_total - new_hits)
        self._kernels_before = (hits, total)

    def save_after_first_call(self, compiled: Callable[..., Any]) -> Callable[..., Any]:
        """`compiled` (just compiled: a miss), saving its entry after its first call."""
        self._count_kernels()
        return _SaveAfterFirstCall(compiled, self._save)

    def _save(self, compiled: Callable[..., Any]) -> None:
        started = time.perf_counter()
        guarded = getattr(compiled, "compiled", compiled)
        if getattr(compiled, "_run", guarded) is not guarded:
            return  # the whole graph runs eagerly
        try:
            plans = export_plans(guarded, lambda runner: export_runner(runner, self.backends))
            data = encode_entry(self.key, GraphEntry(self.key, plans, _size_checks(self.shape_env)))
        except NotPlannable as reason:
            self.context.times.count_cache("aotgrad", False)
            self.context.events.emit("compile", f"{self.context.label}: graph not cached: {reason}")
            return
        except Exception as error:
            warn_once("graph-cache-save", f"Kiln's graph cache could not save a graph ({type(error).__name__}: {error})")
            return
        self.store.write(self.key, data)
        times = self.context.times
        times.count_cache("aotgrad", False, len(plans))
        times.count_cache("inductor", False, _graph_count(plans))
        times.add("cache", time.perf_counter() - started)


class _SaveAfterFirstCall:
    """Calls a freshly compiled graph; after its first call returns, saves it (once)."""

    def __init__(self, compiled: Callable[..., Any], save: Callable[[Callable[..., Any]], None]) -> None:
        self.compiled = compiled
        self._save: Callable[[Callable[..., Any]], None] | None = save

    def __call__(self, *args: Any) -> Any:
        result = self.compiled(*args)
        if self._save is not None:
            save, self._save = self._save, None
            save(self.compiled)
        return result

    def __getattr__(self, name: str) -> Any:
        if name == "compiled":  # not set yet (a copy made without __init__)
            raise AttributeError(name)
        return getattr(self.compiled, name)
