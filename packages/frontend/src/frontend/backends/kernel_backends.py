"""Kernel backends (code generators) per device type, found through the ``kiln.kernel_backends`` group.

codegen_cpp registers ``cpu = codegen_cpp:CppBackend`` and codegen_triton ``cuda =
codegen_triton:TritonBackend``; a third party adds a device (or replaces one) with its own entry.
An entry loads either a class or a ready instance. A class is an ``inductor_ir.ConfigurableKernelBackend``:
it parses its own options (`Config.kernel_backend_options`: the common ones and the user's
``"<device>.*"`` options) and is built with the result, ``cls(config=cls.parse_options(options))``
(see `build_kernel_backend`); nobody matches its parameter names from outside. A class without
``parse_options`` is built without arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from frontend.config import Config
from frontend.context import KernelRecord
from frontend.stage_options import (
    KERNEL_BACKENDS_GROUP,
    KernelBackendUnavailable,
    kernel_backend_entries,
    load_kernel_backend_factory,
)

__all__ = [
    "KERNEL_BACKENDS_GROUP",
    "KernelBackendUnavailable",
    "TimedKernelBackend",
    "build_kernel_backend",
    "kernel_backend_entries",
    "load_kernel_backend",
]


def build_kernel_backend(factory: Any, config: Config, device_type: str = "cpu") -> Any:
    """A kernel backend from what an entry point loaded: a ready instance as it is; a class built
    from the typed options its own ``parse_options`` makes of ``config.kernel_backend_options(device_type)``."""
    if not isinstance(factory, type):
        return factory
    parse = getattr(factory, "parse_options", None)
    if not callable(parse):
        return factory()
    return factory(config=parse(config.kernel_backend_options(device_type)))


def load_kernel_backend(device_type: str, config: Config) -> Any:
    """The code generator for `device_type` ("cpu", "cuda", ...), configured from `config`."""
    factory: Callable[..., Any] = load_kernel_backend_factory(device_type)
    try:
        return build_kernel_backend(factory, config, device_type)
    except KernelBackendUnavailable:
        raise
    except Exception as error:
        point = kernel_backend_entries()[device_type]
        raise KernelBackendUnavailable(
            f"kernel backend {point.value!r} for {device_type!r} failed to start: {type(error).__name__}: {error}"
        ) from error


class TimedKernelBackend:
    """A kernel backend whose kernel generation and compilation are charged to compile_times().

    ``generate`` counts as the "codegen" stage and ``compile`` as "compile" (the C++/Triton
    compiler); everything else is forwarded to the wrapped backend unchanged. Each generated kernel
    is also appended to `kernels` (the compiled function's `CompileContext.kernels`) when given, and
    `cache_counter(libraries, hits)` hears of each compile's cache use when the backend keeps
    ``stats`` (``libraries`` and ``cache_hits`` counters, as codegen_cpp does).
    """

    def __init__(
        self,
        inner: Any,
        stage: Callable[[str], Any],
        kernels: list[KernelRecord] | None = None,
        cache_counter: Callable[[int, int], None] | None = None,
    ) -> None:
        self._inner = inner
        self._stage = stage
        self._kernels = kernels
        self._cache_counter = cache_counter
        self.device_type: str = inner.device_type

    @property
    def inner(self) -> Any:
        """The wrapped kernel backend."""
        return self._inner

    def generate(self, group: Any) -> Any:
        """The wrapped backend's kernel source for `group`, timed as "codegen"."""
        with self._stage("codegen"):
            source = self._inner.generate(group)
        if self._kernels is not None:
            name = str(getattr(source, "name", None) or getattr(group, "name", "kernel"))
            # The ATen ops fused into it: each IR node's origins (a node without any counts as one).
            ops = sum(len(getattr(node, "origins", ())) or 1 for node in getattr(group, "nodes", ()))
            self._kernels.append(KernelRecord(name, self.device_type, ops))
        return source

    def compile(self, sources: Any) -> Any:
        """The wrapped backend's compiled kernels, timed as "compile"."""
        stats = getattr(self._inner, "stats", None)
        before = (getattr(stats, "libraries", 0), getattr(stats, "cache_hits", 0))
        with self._stage("compile"):
            compiled = self._inner.compile(sources)
        if self._cache_counter is not None and stats is not None:
            libraries, hits = getattr(stats, "libraries", 0), getattr(stats, "cache_hits", 0)
            if isinstance(libraries, int) and isinstance(hits, int):
                self._cache_counter(libraries - before[0], hits - before[1])
        return compiled

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
