"""Kernel backends (code generators) per device type, found through the ``kiln.kernel_backends`` group.

codegen_cpp registers ``cpu = codegen_cpp:CppBackend`` and codegen_triton ``cuda =
codegen_triton:TritonBackend``; a third party adds a device (or replaces one) with its own entry.
An entry loads either a class (instantiated with the settings its constructor accepts, see
`instantiate`) or a ready instance.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from frontend.config import Config, default_config_cache_dir
from frontend.context import KernelRecord

KERNEL_BACKENDS_GROUP = "kiln.kernel_backends"
"""The entry-point group of code generators: ``<device type> = module:Class``."""

WIDE_AUTOTUNE_CONFIGS = 16
"""How many launch configurations a kernel may try under mode="max-autotune"."""


class KernelBackendUnavailable(RuntimeError):
    """No code generator could be loaded for a device type; the message says why."""


def kernel_backend_entries() -> dict[str, Any]:
    """The entry points of the kernel-backend group by device type (not loaded)."""
    return {point.name: point for point in entry_points(group=KERNEL_BACKENDS_GROUP)}


def _settings(config: Config, device_type: str, debug_dir: Path | None) -> dict[str, Any]:
    """The generic settings a kernel backend's constructor or config dataclass may accept.

    The cache folder is passed only when the user moved it away from the environment's default
    (then each device gets ``cache_dir/<device type>``); otherwise backends keep their own layout.
    """
    settings: dict[str, Any] = {
        "max_autotune": config.max_autotune,
        "autotune": True,
        "fallback_random": config.fallback_random,
        "runtime_checks": config.runtime_checks,
        "debug_dir": debug_dir,
    }
    if config.max_autotune:
        settings["max_configs"] = WIDE_AUTOTUNE_CONFIGS
    if config.cache_dir != default_config_cache_dir():
        settings["cache_dir"] = config.cache_dir / device_type
    return settings


def _config_object(annotation: Any, settings: dict[str, Any]) -> Any | None:
    """An instance of a backend's config dataclass, filled from the settings it has fields for.

    A dataclass with a ``from_env(**overrides)`` constructor is made through it, so the backend's
    own environment variables (``CXX`` for the C++ compiler) still apply.
    """
    candidates = typing.get_args(annotation) or (annotation,)
    for candidate in candidates:
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            names = {f.name for f in dataclasses.fields(candidate) if f.init}
            values = {k: v for k, v in settings.items() if k in names}
            make = getattr(candidate, "from_env", None)
            return make(**values) if callable(make) else candidate(**values)
    return None


def instantiate(factory: Any, config: Config, device_type: str = "cpu", debug_dir: Path | None = None) -> Any:
    """A kernel backend from what an entry point loaded: an instance, or a class to construct.

    The constructor gets those of the generic settings (max_autotune, fallback_random, runtime_checks,
    cache_dir, debug_dir) it names; a ``config`` parameter annotated with a dataclass gets an instance of that
    dataclass filled the same way.
    """
    if not isinstance(factory, type):
        return factory
    settings = _settings(config, device_type, debug_dir)
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return factory()
    try:
        init = next(vars(klass)["__init__"] for klass in factory.__mro__ if "__init__" in vars(klass))
        hints = typing.get_type_hints(init)
    except Exception:  # unresolvable annotations: pass the plain keyword settings only
        hints = {}
    kwargs: dict[str, Any] = {}
    for name, parameter in signature.parameters.items():
        if name in settings:
            kwargs[name] = settings[name]
        elif name == "config" and name in hints:
            made = _config_object(hints[name], settings)
            if made is not None:
                kwargs[name] = made
        elif parameter.default is inspect.Parameter.empty and parameter.kind not in (
            inspect.Parameter.VAR_POSITIONAL,
            inspect.Parameter.VAR_KEYWORD,
        ):
            raise KernelBackendUnavailable(f"cannot construct {factory.__name__}: required parameter {name!r}")
    return factory(**kwargs)


def load_kernel_backend(device_type: str, config: Config, debug_dir: Path | None = None) -> Any:
    """The code generator for `device_type` ("cpu", "cuda", ...), configured from `config`.

    `debug_dir`, when given, is where the backend may write its kernels' sources.
    """
    entries = kernel_backend_entries()
    if device_type not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise KernelBackendUnavailable(
            f"no kernel backend is installed for device {device_type!r} (installed: {known}); "
            f"install one that registers under the {KERNEL_BACKENDS_GROUP!r} entry-point group"
        )
    point = entries[device_type]
    try:
        factory: Callable[..., Any] = point.load()
    except Exception as error:
        raise KernelBackendUnavailable(
            f"kernel backend {point.value!r} for {device_type!r} failed to import: {type(error).__name__}: {error}"
        ) from error
    try:
        return instantiate(factory, config, device_type, debug_dir)
    except KernelBackendUnavailable:
        raise
    except Exception as error:
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
