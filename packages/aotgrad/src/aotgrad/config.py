"""aotgrad's configuration: a typed dataclass passed to the entry points."""

from __future__ import annotations

import dataclasses


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

    def replace(self, **changes: object) -> AotConfig:
        """A copy with `changes` applied."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
