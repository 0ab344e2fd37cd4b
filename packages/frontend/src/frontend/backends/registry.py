"""The backends registry: names -> graph compilers, including third-party ones from entry points.

A backend is what capture hands each FX graph to. User backends have torch's shape,
``(gm, example_inputs) -> callable``; Kiln's built-in ones also take the `CompileContext`.
Third-party packages add backends through the ``kiln.backends`` entry-point group, whose
entries load a ``(gm, example_inputs)`` callable.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol

import torch

from frontend.context import CompileContext
from frontend.errors import UnknownBackendError

ENTRY_POINT_GROUP = "kiln.backends"
"""The entry-point group where third-party packages register frontend backends."""


_log = logging.getLogger("kiln.backends")


class ContextBackend(Protocol):
    """A backend that also receives the compile context (config, timer, debug output)."""

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor], context: CompileContext
    ) -> Callable[..., Any]: ...


@dataclass(frozen=True)
class BackendEntry:
    """One registered backend: its name, its compiler and a one-line description."""

    name: str
    compiler: ContextBackend
    description: str = ""
    source: str = "builtin"


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        return "context" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def adapt(fn: Callable[..., Any]) -> ContextBackend:
    """`fn` as a context backend: passed the context if it has a ``context`` parameter."""
    if _takes_context(fn):
        return fn  # type: ignore[return-value]

    def plain(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor], context: CompileContext) -> Any:
        return fn(gm, example_inputs)

    plain.__name__ = getattr(fn, "__name__", type(fn).__name__)
    return plain


class BackendRegistry:
    """Backends by name: Kiln's own, those registered at run time, and entry-point plugins."""

    def __init__(self, entry_point_group: str = ENTRY_POINT_GROUP) -> None:
        self._entries: dict[str, BackendEntry] = {}
        self._group = entry_point_group
        self._plugins_loaded = False

    def register(self, name: str, compiler: Callable[..., Any], description: str = "", source: str = "user") -> None:
        """Register `compiler` under `name`; re-registering a name replaces it."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a backend name must be a non-empty string, got {name!r}")
        if not callable(compiler):
            raise TypeError(f"backend {name!r} must be callable as (gm, example_inputs), got {compiler!r}")
        self._entries[name] = BackendEntry(name, adapt(compiler), description, source)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        found: dict[str, BackendEntry] = {}
        for point in entry_points(group=self._group):
            entry = BackendEntry(point.name, _LazyEntryPoint(point), f"from {point.value}", source="entry point")
            found.setdefault(point.name, entry)
        for name, entry in found.items():
            self._entries.setdefault(name, entry)
        # Marked done only now: an interrupt (Ctrl-C) while the entry points were read leaves the
        # plugins to be read again, not missing for the rest of the process.
        self._plugins_loaded = True

    def names(self) -> list[str]:
        """Every registered backend name, sorted."""
        self._load_plugins()
        return sorted(self._entries)

    def entry(self, name: str) -> BackendEntry:
        """The entry named `name`, or UnknownBackendError listing every known name."""
        self._load_plugins()
        if name not in self._entries:
            known = ", ".join(self.names())
            raise UnknownBackendError(
                f"unknown backend {name!r}; known backends are: {known}. "
                "Pass one of these names, a callable (gm, example_inputs) -> callable, "
                "or register yours with frontend.register_backend."
            )
        return self._entries[name]


class _LazyEntryPoint:
    """A backend loaded from an entry point the first time it compiles something."""

    def __init__(self, point: Any) -> None:
        self._point = point
        self._loaded: ContextBackend | None = None

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor], context: CompileContext
    ) -> Callable[..., Any]:
        if self._loaded is None:
            try:
                self._loaded = adapt(self._point.load())
            except Exception as error:
                raise UnknownBackendError(
                    f"backend {self._point.name!r} (entry point {self._point.value!r}) failed to load: {error}"
                ) from error
        return self._loaded(gm, example_inputs, context)


REGISTRY = BackendRegistry()
"""The process-wide registry behind `list_backends` and `register_backend`."""


def register_backend(
    compiler_fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str = ""
) -> Any:
    """Register a backend so ``frontend.compile(m, backend=name)`` finds it.

    Usable as ``register_backend(fn, name="mine")``, ``@register_backend`` (the function's name is
    the backend's) or ``@register_backend(name="mine")``. The compiler takes ``(gm,
    example_inputs)`` and returns a callable; it may also take a ``context`` keyword to receive the
    `CompileContext`.
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        REGISTRY.register(name or fn.__name__, fn, description or (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    if compiler_fn is None:
        return register
    return register(compiler_fn)


def list_backends(exclude: tuple[str, ...] = ()) -> list[str]:
    """The names of every available backend (built-in, registered and entry-point plugins), sorted.

    Args:
        exclude: names to leave out of the list.
    """
    return [name for name in REGISTRY.names() if name not in exclude]


def lookup_backend(backend: str | Callable[..., Any]) -> ContextBackend:
    """The context backend for a name or a callable; unknown names raise listing the known ones."""
    if isinstance(backend, str):
        return REGISTRY.entry(backend).compiler
    if callable(backend):
        return adapt(backend)
    raise UnknownBackendError(
        f"backend must be a name ({', '.join(REGISTRY.names())}) or a callable (gm, example_inputs), got {backend!r}"
    )
