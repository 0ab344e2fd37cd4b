"""Shrinking a failing program: drop lines of its function while the failure stays the same kind.

A line is dropped together with the block it opens (the lines indented under it); a candidate that
is not valid Python, or whose eager run raises where the original's did not, is not kept.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import replace

from tools.pyfuzz.check import Verdict
from tools.pyfuzz.generator import PyProgram

__all__ = ["shrink"]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _without(lines: list[str], start: int) -> list[str]:
    """`lines` without line `start` and the block under it."""
    end = start + 1
    while end < len(lines) and _indent(lines[end]) > _indent(lines[start]):
        end += 1
    return lines[:start] + lines[end:]


def shrink(program: PyProgram, fails: Callable[[PyProgram], Verdict], kind: str, max_tries: int = 300) -> PyProgram:
    """The smallest program found whose verdict is still of `kind`."""
    head, _, body = program.source.partition("def program(x, y, n):\n")
    lines = body.rstrip("\n").split("\n")
    tries = 0
    changed = True
    while changed and tries < max_tries:
        changed = False
        k = 0
        while k < len(lines) - 1 and tries < max_tries:  # the return line stays
            candidate = _without(lines, k)
            text = head + "def program(x, y, n):\n" + "\n".join(candidate) + "\n"
            try:
                ast.parse(text)
            except SyntaxError:
                k += 1
                continue
            tries += 1
            if fails(replace(program, source=text)).kind == kind:
                lines, changed = candidate, True
            else:
                k += 1
    return replace(program, source=head + "def program(x, y, n):\n" + "\n".join(lines) + "\n")
