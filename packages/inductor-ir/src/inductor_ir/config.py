"""`InductorIRConfig`: the options of `compile_graph` (and `lower`), parsed from a dictionary as well."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from inductor_ir.options import options_hash, parse_dataclass_options

__all__ = ["DEFAULT_CONFIG", "InductorIRConfig"]


@dataclass(frozen=True)
class InductorIRConfig:
    """Options of ``compile_graph``.

    fuse: fuse kernels (False: one kernel per computed buffer).
    debug_dir: when set, every artifact (IR, groups, kernels, wrapper) is written there.
    layout_optimization: store the feature maps of CUDA convolution graphs channels-last (see ``lower``
        and docs/inductor-ir.md). On by default: it cuts both GPU and wall time per call (resnet50
        inference on an H200: 3.83 -> 2.97 ms per call); CPU graphs never change.
    check_inputs: check each call's inputs against the compiled dtypes and sizes (a caller that guards
        its inputs already, as the frontend's capture does, can save that per-call cost).
    pause_gc: pause Python's cyclic garbage collector while compiling (restored afterwards). Lowering
        and scheduling allocate millions of small objects, and each automatic collection rescans the
        whole heap (torch, the model, the graphs): on large graphs that was a third to half of the
        lowering and scheduling time. Unreachable cycles made meanwhile are freed by the next collection.
    check_ir: run ``Program.check()`` after lowering and ``Schedule.check()`` after scheduling (an
        ``AssertionError`` naming the first broken invariant). For debugging and tests: it traces every
        buffer's body again. It never changes the compiled code, so it is not part of ``hash()``.
    strict_lowering: a lowering that raises (a bug in it, not ``NotLowerable``) raises from
        ``compile_graph``, with the FX node and the user's line in a note. Off: the op runs as a
        ``FallbackKernel`` and the error is recorded in ``program.lowering_errors``.

    Example::

        config = InductorIRConfig.parse_options({"layout_optimization": False})
        compiled = inductor_ir.compile_graph(gm, inputs, backends=backends, config=config)
    """

    fuse: bool = True
    debug_dir: str | None = None
    layout_optimization: bool = True
    check_inputs: bool = True
    pause_gc: bool = True
    check_ir: bool = False
    strict_lowering: bool = False

    @classmethod
    def parse_options(cls, options: Mapping[str, Any], base: InductorIRConfig | None = None) -> InductorIRConfig:
        """A config from ``{field: value}`` (over `base`, default the defaults); an unknown key raises
        `inductor_ir.OptionError` listing the valid ones, a value of the wrong type says what was expected."""
        return parse_dataclass_options(cls, options, owner="inductor_ir", base=base)

    def hash(self) -> str:
        """This config's identity for cache keys: every field that changes the compiled code."""
        return options_hash(self, exclude=("debug_dir", "pause_gc", "check_ir"))

    @staticmethod
    def defaults() -> InductorIRConfig:
        """The config ``compile_graph`` uses when given none: the field defaults, or those that
        :meth:`patch_defaults` set for the current scope."""
        return _SCOPED_DEFAULTS.get() or DEFAULT_CONFIG

    @staticmethod
    @contextmanager
    def patch_defaults(**changes: Any) -> Iterator[InductorIRConfig]:
        """Within the ``with`` body (this thread or task), ``compile_graph`` calls given no config use
        the current defaults with ``changes`` (checked as :meth:`parse_options` checks them).

        Example (the test suites of inductor_ir and its code generators)::

            with InductorIRConfig.patch_defaults(check_ir=True):
                compiled = inductor_ir.compile_graph(gm, inputs, backends=backends)  # checked
        """
        patched = InductorIRConfig.parse_options(changes, base=InductorIRConfig.defaults())
        token = _SCOPED_DEFAULTS.set(patched)
        try:
            yield patched
        finally:
            _SCOPED_DEFAULTS.reset(token)


DEFAULT_CONFIG = InductorIRConfig()
"""The field defaults: ``lower``'s defaults, and what ``compile_graph`` uses without a config (unless
``InductorIRConfig.patch_defaults`` changed them in scope)."""

_SCOPED_DEFAULTS: ContextVar[InductorIRConfig | None] = ContextVar("inductor_ir_scoped_defaults", default=None)
