"""What differs between the CPython versions capture supports: one record per version.

Handlers, the resume-function generator and the eager-copy rewriter read the running Python's record
(`DIALECT`) instead of testing `sys.version_info` themselves. Opcodes that exist on some versions only
are handled through the registry's `min_version`/`max_version` instead.

The calling convention is the main difference. CALL pops two slots below its arguments:

* 3.11, 3.12: ``[NULL, callable]`` for a plain call, ``[method, self]`` for a method call;
* 3.13: ``[callable, NULL]`` for a plain call, ``[method, self]`` for a method call (the callable
  always sits in the lower slot: LOAD_GLOBAL, LOAD_ATTR, LOAD_SUPER_ATTR and PUSH_NULL put the NULL
  *after* the callable).

CALL_FUNCTION_EX keeps a NULL next to its callable the same way (``[NULL, f, args, kwargs]`` and
``[f, NULL, args, kwargs]``). Keyword names come from a KW_NAMES instruction before CALL on 3.11 and
3.12, and as a tuple on the stack above the arguments for 3.13's CALL_KW.

3.13's conditional jumps and UNARY_NOT take exact bools, made by TO_BOOL (or COMPARE_OP's bool bit)
just before them. The trace keeps the value itself until the jump tests its truth, as on 3.12, so a
tensor's comparison stays in the graph and the break is at the jump; a break stub for such an
instruction runs TO_BOOL first.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

Version = tuple[int, int]
CURRENT: Version = (sys.version_info.major, sys.version_info.minor)


@dataclass(frozen=True)
class Dialect:
    """The bytecode conventions of one CPython version."""

    version: Version
    null_after_callable: bool  # CALL's slots are [callable, NULL] (3.13), not [NULL, callable]
    precall: bool  # PRECALL before every CALL (3.11)
    kw_names_instruction: bool  # KW_NAMES before CALL (3.11, 3.12); else CALL_KW with the names on the stack
    for_iter_exhausted_skip: int  # instructions at FOR_ITER's target skipped when the iterator is exhausted
    bool_operand: frozenset[str] = frozenset()  # instructions that require an exact bool (3.13: after TO_BOOL)

    def call_target(self, lower: Any, upper: Any, is_null: Any) -> tuple[Any, Any | None]:
        """(callable, self or None) from CALL's two slots below its arguments (`is_null(slot)` tests a NULL)."""
        if self.null_after_callable:
            return lower, (None if is_null(upper) else upper)
        if is_null(lower):
            return upper, None
        return lower, upper

    def null_slot(self, base: int) -> int:
        """The stack index of a plain call's NULL, where `base` is the lower of its two slots."""
        return base + 1 if self.null_after_callable else base

    def callable_slot(self, base: int) -> int:
        """The stack index of a plain call's callable (`base`: the lower of its two slots)."""
        return base if self.null_after_callable else base + 1

    def with_null(self, callee: list[Any], null: list[Any]) -> list[Any]:
        """Instructions (or values) loading a callable and its NULL, in this version's order."""
        return [*callee, *null] if self.null_after_callable else [*null, *callee]


DIALECTS: dict[Version, Dialect] = {
    (3, 11): Dialect((3, 11), null_after_callable=False, precall=True, kw_names_instruction=True,
                     for_iter_exhausted_skip=0),
    (3, 12): Dialect((3, 12), null_after_callable=False, precall=False, kw_names_instruction=True,
                     for_iter_exhausted_skip=1),  # END_FOR (pops the iterator and the value)
    (3, 13): Dialect((3, 13), null_after_callable=True, precall=False, kw_names_instruction=False,
                     for_iter_exhausted_skip=2,  # END_FOR and the POP_TOP of the iterator
                     bool_operand=frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "UNARY_NOT"})),
}
SUPPORTED: tuple[Version, ...] = tuple(DIALECTS)
NEWEST: Version = max(DIALECTS)
DIALECT: Dialect | None = DIALECTS.get(CURRENT)
"""The running Python's dialect; None on a version capture does not support (everything runs eagerly)."""


def current() -> Dialect:
    """The running Python's dialect (only called once `cache.python_supported()` said yes)."""
    if DIALECT is None:
        raise RuntimeError(f"capture has no bytecode dialect for Python {CURRENT[0]}.{CURRENT[1]}")
    return DIALECT
