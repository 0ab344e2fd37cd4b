"""Options for the stages under the frontend: ``options={"<stage>.<name>": value}``.

`frontend.compile(options=...)` takes the frontend's own `Config` fields and, namespaced by a dotted
prefix, every stage's own options, which that stage parses itself (Triton's backend interface:
``parse_options(dict)`` rejecting unknown keys with the list of known ones):

* ``capture.<field>``: `capture.CaptureConfig` (``capture.cache_size_limit``, ...);
* ``aotgrad.<field>``: `aotgrad.AotConfig`;
* ``inductor_ir.<field>``: `inductor_ir.InductorIRConfig` (``inductor_ir.layout_optimization``, ...);
* ``<device type>.<option>``: the kernel backend registered for that device in the
  ``kiln.kernel_backends`` entry-point group (``cpu.vectorize`` for codegen_cpp, ``cuda.max_configs``
  for codegen_triton), through its ``parse_options``.

Each key is checked when `frontend.compile` is called (a kernel backend's class is loaded for it
only when an option names its device). The frontend's own options reach the stages too:
``fallback_to_eager`` is aotgrad's default, and ``max_autotune``, ``fallback_random``,
``runtime_checks`` and ``cache_dir`` reach every kernel backend as inductor_ir's
`COMMON_BACKEND_OPTIONS`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import aotgrad
import capture
import inductor_ir
from frontend.errors import InvalidOptionError

__all__ = [
    "KERNEL_BACKENDS_GROUP",
    "STAGES",
    "KernelBackendUnavailable",
    "check_stage_option",
    "is_stage_namespace",
    "kernel_backend_entries",
    "load_kernel_backend_factory",
]

KERNEL_BACKENDS_GROUP = "kiln.kernel_backends"
"""The entry-point group of code generators: ``<device type> = module:Class``."""

STAGES: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "capture": capture.CaptureConfig.parse_options,
    "aotgrad": aotgrad.AotConfig.parse_options,
    "inductor_ir": inductor_ir.InductorIRConfig.parse_options,
}
"""The pipeline stages whose options are namespaced by their name, and the parser of each."""


class KernelBackendUnavailable(RuntimeError):
    """No code generator could be loaded for a device type; the message says why."""


# The group's entry points as last read, with the `_search_path_state` they were read under.
_ENTRIES_READ: tuple[tuple[tuple[str, int], ...], dict[str, EntryPoint]] | None = None


# What each device's entry point loaded, with that entry point (valid while the entries are those read).
_FACTORIES: dict[str, tuple[EntryPoint, Any]] = {}


def _search_path_state() -> tuple[tuple[str, int], ...]:
    """Each import path with its folder's modification time (-1 where it has none): installing or
    removing a distribution changes the folder it goes into, adding a path changes the list."""
    state = []
    for path in sys.path:
        try:
            state.append((path, os.stat(path or ".").st_mtime_ns))
        except (OSError, ValueError):
            state.append((path, -1))
    return tuple(state)


def kernel_backend_entries() -> dict[str, EntryPoint]:
    """The entry points of the kernel-backend group by device type (not loaded).

    Reading the installed distributions' metadata takes milliseconds, and every compiled graph asks:
    the entries are read again only when an import path or its folder changed since the last read.
    """
    global _ENTRIES_READ
    state = _search_path_state()
    if _ENTRIES_READ is None or _ENTRIES_READ[0] != state:
        _ENTRIES_READ = (state, {point.name: point for point in entry_points(group=KERNEL_BACKENDS_GROUP)})
    return dict(_ENTRIES_READ[1])


def load_kernel_backend_factory(device_type: str) -> Any:
    """What the kernel-backend entry point of `device_type` loads: a backend class, or a ready instance."""
    entries = kernel_backend_entries()
    if device_type not in entries:
        known = ", ".join(sorted(entries)) or "none"
        raise KernelBackendUnavailable(
            f"no kernel backend is installed for device {device_type!r} (installed: {known}); "
            f"install one that registers under the {KERNEL_BACKENDS_GROUP!r} entry-point group"
        )
    point = entries[device_type]
    loaded = _FACTORIES.get(device_type)
    if loaded is not None and loaded[0] is point:
        return loaded[1]
    try:
        factory = point.load()
    except Exception as error:
        raise KernelBackendUnavailable(
            f"kernel backend {point.value!r} for {device_type!r} failed to import: {type(error).__name__}: {error}"
        ) from error
    _FACTORIES[device_type] = (point, factory)
    return factory


def _check_kernel_option(device_type: str, name: str, value: Any) -> None:
    try:
        factory = load_kernel_backend_factory(device_type)
    except KernelBackendUnavailable as error:
        raise InvalidOptionError(f"option '{device_type}.{name}': {error}") from error
    parse = getattr(factory, "parse_options", None)
    if not isinstance(factory, type) or not callable(parse):
        raise InvalidOptionError(
            f"option '{device_type}.{name}': the kernel backend for {device_type!r} ({factory!r}) takes no options "
            "(it has no parse_options class method)"
        )
    parse({name: value})


def check_stage_option(stage: str, name: str, value: Any) -> None:
    """Raise InvalidOptionError unless `stage` (a stage name or a device type) accepts ``name=value``.

    The message is the stage's own: an unknown name lists that stage's valid ones.
    """
    try:
        if stage in STAGES:
            STAGES[stage]({name: value})
        else:
            _check_kernel_option(stage, name, value)
    except InvalidOptionError:
        raise
    except (ValueError, TypeError) as error:
        raise InvalidOptionError(f"option '{stage}.{name}': {error}") from error


def is_stage_namespace(prefix: str) -> bool:
    """Whether ``prefix.<name>`` addresses a stage: a stage name or a device type with a kernel backend."""
    return prefix in STAGES or prefix in kernel_backend_entries()
