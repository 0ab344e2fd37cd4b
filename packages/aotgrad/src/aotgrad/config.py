"""aotgrad's configuration: a typed dataclass passed to the entry points."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class AotConfig:
    """Options of `aot_graph`, `aot_function` and `aot_module`.

    Attributes:
        fallback_to_eager: when a graph cannot be traced (an op without a meta kernel, a
            data-dependent shape, a metadata mutation of an input...), log the reason and run that
            graph eagerly instead of raising. Set False to get the error (`UnsupportedOperatorError`
            or `TracingError`) raised.
    """

    fallback_to_eager: bool = True

    @classmethod
    def parse_options(cls, options: Mapping[str, Any], base: AotConfig | None = None) -> AotConfig:
        """A new config: `base` (default: the defaults) with ``{field: value}`` applied.

        An unknown key raises ValueError listing the valid ones; a value of another type than the
        field's raises ValueError saying what was expected.
        """
        start = base if base is not None else cls()
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(str(key) for key in options if key not in names)
        if unknown:
            raise ValueError(f"unknown aotgrad option(s) {unknown}; valid options are: {', '.join(names)}")
        for name, value in options.items():
            expected = type(getattr(start, name))
            if type(value) is not expected:
                raise ValueError(f"aotgrad option {name!r} expects {expected.__name__}, got {value!r}")
        return dataclasses.replace(start, **options)

    def hash(self) -> str:
        """This config's identity for cache keys: every field, by name and value."""
        fields = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)]
        return hashlib.sha256("\n".join(fields).encode()).hexdigest()

    def replace(self, **changes: object) -> AotConfig:
        """A copy with `changes` applied."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
