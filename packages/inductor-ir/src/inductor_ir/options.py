"""Typed options from a plain dictionary: how a stage's config, or a kernel backend, parses ``options``.

Modelled on Triton's backend interface (``parse_options(dict) -> options``, ``hash() -> str``): a
frontend hands each stage the user's options as a dictionary; the stage turns it into its own frozen
dataclass, rejecting unknown keys with the list of known ones, and states its identity as a digest
of the fields that change what it produces (for cache keys).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import types
import typing
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

__all__ = ["OptionError", "options_hash", "parse_dataclass_options"]

C = TypeVar("C")


class OptionError(ValueError):
    """An option key a stage does not know, or a value of the wrong type; the message lists the valid keys."""


def _coerce(owner: str, name: str, expected: Any, value: Any) -> Any:
    """`value` as the field type `expected` (a str for a Path, a list for a tuple), or OptionError."""
    args = typing.get_args(expected)
    if typing.get_origin(expected) in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(owner, name, option, value)
            except OptionError:
                continue
    elif expected is bool:
        if isinstance(value, bool):
            return value
    elif expected is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif expected is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif expected is str:
        if isinstance(value, str):
            return value
    elif expected is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
    elif typing.get_origin(expected) is tuple:
        if isinstance(value, (list, tuple)):
            return tuple(value)
    else:
        return value  # a type this parser does not check
    type_name = getattr(expected, "__name__", None) or str(expected)
    raise OptionError(f"{owner} option {name!r} expects {type_name}, got {value!r} ({type(value).__name__})")


@functools.cache
def _field_hints(cls: type) -> dict[str, Any]:
    """The evaluated field annotations of `cls` (evaluating them costs ~1 ms, and options are parsed per graph)."""
    return typing.get_type_hints(cls)


def parse_dataclass_options(
    cls: type[C], options: Mapping[str, Any], *, owner: str, base: C | None = None
) -> C:
    """An instance of the dataclass `cls`: `base` (default: ``cls()``) with `options` applied.

    Args:
        cls: the stage's options dataclass.
        options: field name -> value; unknown names raise `OptionError` listing the valid ones.
        owner: the stage's name, for messages ("inductor_ir", "the C++ backend").
        base: the values the options change.
    """
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")}  # type: ignore[arg-type]
    unknown = sorted(str(key) for key in options if key not in fields)
    if unknown:
        raise OptionError(
            f"unknown {owner} option(s) {', '.join(repr(k) for k in unknown)}; valid options are: {', '.join(fields)}"
        )
    hints = _field_hints(cast(type, cls))
    values = {name: _coerce(owner, name, hints[name], value) for name, value in options.items()}
    start = base if base is not None else cls()
    return dataclasses.replace(start, **values)  # type: ignore[type-var]


def options_hash(options: Any, *, exclude: Collection[str] = ()) -> str:
    """A digest of a dataclass instance's class and field values (except `exclude`), stable across processes."""
    cls = type(options)
    parts = [f"{cls.__module__}.{cls.__qualname__}"]
    for f in dataclasses.fields(options):
        if f.name not in exclude and not f.name.startswith("_"):
            parts.append(f"{f.name}={getattr(options, f.name)!r}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()
