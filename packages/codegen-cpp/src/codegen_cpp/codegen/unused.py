"""Dropping the values a kernel computes but never reads.

The handler prints one line per op as the body runs, before later ops decide how to use it: an
index comparison decided once per vector (codegen/ranged.py's ``_order``) leaves the int64 lanes it
would have compared (``auto tmp1 = kiln::iota<kiln::i64x>((x1 % 32));`` and the splats and
differences built on them) unread. g++ removes such code anyway; removing it from the source keeps
the kernel readable and says what it computes.

Only a line ``[const] auto tmpN = EXPR;`` whose ``tmpN`` is named nowhere else in the kernel goes,
and only when ``EXPR`` is built from operators, temporaries, loop variables and the calls in
``_PURE_CALLS`` (no lambdas, no runtime checks, which record failures, no stores). Removing one line
may leave others unread; they go in turn.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

__all__ = ["drop_unused_values"]

_DEFINITION = re.compile(r"^\s*(?:const )?auto (?P<name>tmp\d+) = (?P<expr>.+);$")
_TEMPORARY = re.compile(r"\btmp\d+\b")
_CALL = re.compile(r"([A-Za-z_][\w:]*)\s*(?:<[^<>()]*>)?\s*\(")
_PURE_CALLS = frozenset(
    {"kiln::iota", "kiln::splat", "kiln::splat_mask", "kiln::lt", "kiln::le", "kiln::gt", "kiln::ge",
     "kiln::eq", "kiln::ne", "static_cast", "INT64_C"}
)
_OTHER_TEXT = re.compile(r"^[\w\s+\-*/%&|^~!<>=()?:.,]*$")  # operators, names, numbers, casts' types


def _pure(expr: str) -> bool:
    """Whether evaluating ``expr`` only computes a value (see the module's docstring)."""
    if "[" in expr or "{" in expr or not _OTHER_TEXT.match(expr):
        return False
    return all(call in _PURE_CALLS for call in _CALL.findall(expr))


def drop_unused_values(lines: Sequence[str]) -> list[str]:
    """``lines`` without the pure temporaries no other line reads.

    Example:
        >>> drop_unused_values(["auto tmp1 = kiln::iota<kiln::i64x>(x1);", "auto tmp2 = (tmp1 - tmp1);",
        ...                     "auto tmp3 = kiln::load(in_ptr0 + x1);", "kiln::store(out_ptr0 + x1, tmp3);"])
        ['auto tmp3 = kiln::load(in_ptr0 + x1);', 'kiln::store(out_ptr0 + x1, tmp3);']
    """
    uses = Counter(name for line in lines for name in _TEMPORARY.findall(line))
    candidates: dict[str, int] = {}
    for number, line in enumerate(lines):
        match = _DEFINITION.match(line)
        if match is not None and _pure(match["expr"]):
            # A name defined twice (the two variants of a kernel) counts both definitions: kept.
            candidates[match["name"]] = number
    dropped: set[int] = set()
    pending = [name for name in candidates if uses[name] == 1]
    while pending:
        name = pending.pop()
        number = candidates[name]
        if number in dropped:
            continue
        dropped.add(number)
        for read in _TEMPORARY.findall(lines[number]):
            uses[read] -= 1
            if read != name and uses[read] == 1 and read in candidates:
                pending.append(read)
    return [line for number, line in enumerate(lines) if number not in dropped]
