"""Typed configuration of `capture`, overridable in a scope with `config.patch(...)`."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass
class CaptureConfig:
    """Knobs of the capture stage.

    Attributes:
        cache_size_limit: compiled entries kept per code object; past it the function runs eagerly
            (with one warning naming the guard that failed).
        fallback_on_internal_error: when the capture machinery itself fails, run the original code
            eagerly (and log why) instead of raising.
        max_inline_depth: how deep calls to user functions are inlined into one graph.
        verbose: log every compiled graph, graph break and recompilation through `logging`.
        capture_scalar_outputs: `Tensor.item()` and `Tensor.tolist()` stay in the graph as unbacked
            symbolic numbers (a Python branch on one is a graph break); False: a graph break at the call.
        capture_dynamic_output_shape_ops: ops whose output size depends on the data (`nonzero`,
            `masked_select`, `unique`, boolean-mask indexing) stay in the graph with unbacked symbolic
            sizes; False: a graph break at the call.
    """

    cache_size_limit: int = 8
    fallback_on_internal_error: bool = True
    max_inline_depth: int = 32
    verbose: bool = bool(os.environ.get("KILN_CAPTURE_VERBOSE"))
    capture_scalar_outputs: bool = os.environ.get("KILN_CAPTURE_SCALAR_OUTPUTS", "1") != "0"
    capture_dynamic_output_shape_ops: bool = os.environ.get("KILN_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS", "1") != "0"

    @classmethod
    def parse_options(cls, options: Mapping[str, Any], base: CaptureConfig | None = None) -> CaptureConfig:
        """A new config: `base` (default: the defaults) with ``{field: value}`` applied.

        An unknown key raises ValueError listing the valid ones; a value of another type than the
        field's (an int for a bool) raises ValueError saying what was expected.
        """
        start = base if base is not None else cls()
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(str(key) for key in options if key not in names)
        if unknown:
            raise ValueError(f"unknown capture option(s) {unknown}; valid options are: {', '.join(names)}")
        for name, value in options.items():
            expected = type(getattr(start, name))
            if type(value) is not expected:
                raise ValueError(f"capture option {name!r} expects {expected.__name__}, got {value!r}")
        return dataclasses.replace(start, **options)

    def hash(self) -> str:
        """This config's identity for cache keys: every field that changes what is captured."""
        fields = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.name != "verbose"]
        return hashlib.sha256("\n".join(fields).encode()).hexdigest()

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator[CaptureConfig]:
        """Temporarily set fields, restoring them on exit.

        Example: ``with config.patch(cache_size_limit=2): ...``
        """
        names = {field.name for field in dataclasses.fields(self)}
        unknown = set(changes) - names
        if unknown:
            raise AttributeError(f"capture config has no field(s) {sorted(unknown)}; known: {sorted(names)}")
        saved = {name: getattr(self, name) for name in changes}
        for name, value in changes.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in saved.items():
                setattr(self, name, value)


config = CaptureConfig()
"""The default configuration used when `optimize` is given none."""
