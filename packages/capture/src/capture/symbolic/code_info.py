"""Decoded instructions of a code object, jump targets, try regions and local liveness."""

from __future__ import annotations

import functools
import types
from dataclasses import dataclass

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd

# How each instruction touches local names, in execution order: ("read"/"write", which name of its argument).
_LOCAL_EFFECTS: dict[str, tuple[tuple[str, int], ...]] = {
    **{name: (("read", 0),) for name in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST",
                                          "MAKE_CELL", "LOAD_CLOSURE")},
    "STORE_FAST": (("write", 0),),
    "LOAD_FAST_LOAD_FAST": (("read", 0), ("read", 1)),  # 3.13 superinstructions: a pair of names
    "STORE_FAST_LOAD_FAST": (("write", 0), ("read", 1)),
    "STORE_FAST_STORE_FAST": (("write", 0), ("write", 1)),
}
_TERMINATORS = {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
                "JUMP_BACKWARD_NO_INTERRUPT"}


@dataclass(frozen=True)
class CodeInfo:
    """The real instructions of a code object, in order, with their jump targets resolved.

    `instructions[i]` corresponds to the i-th instruction `dis` shows (minus EXTENDED_ARG/CACHE).
    """

    code: types.CodeType
    instructions: tuple[Instr, ...]
    label_index: dict[Label, int]
    in_try: frozenset[int]
    handlers: dict[int, tuple[Label, ...]]
    try_entries: dict[int, TryBegin]

    def target(self, instr: Instr) -> int:
        """Index of the jump target of `instr`."""
        label: Label = instr.arg  # type: ignore[assignment]
        return self.label_index[label]

    @functools.cached_property
    def live_in(self) -> tuple[frozenset[str], ...]:
        """For each instruction, the local names that may be read before being written from there on."""
        n = len(self.instructions)
        live: list[frozenset[str]] = [frozenset()] * (n + 1)
        changed = True
        while changed:
            changed = False
            for i in range(n - 1, -1, -1):
                instr = self.instructions[i]
                out: set[str] = set()
                if instr.name not in _TERMINATORS and i + 1 < n:
                    out |= live[i + 1]
                arg = instr.arg
                if isinstance(arg, Label):
                    out |= live[self.label_index[arg]]
                for handler in self.handlers.get(i, ()):
                    out |= live[self.label_index[handler]]
                for effect, position in reversed(_LOCAL_EFFECTS.get(instr.name, ())):
                    name = local_names(instr)[position]
                    if name is None:
                        continue
                    if effect == "write":
                        out.discard(name)
                    else:
                        out.add(name)
                new = frozenset(out)
                if new != live[i]:
                    live[i] = new
                    changed = True
        return tuple(live[:n])


def _local_name(arg: object) -> str | None:
    if isinstance(arg, str):
        return arg
    name = getattr(arg, "name", None)
    return name if isinstance(name, str) else None


def local_names(instr: Instr) -> tuple[str | None, ...]:
    """The local names in `instr`'s argument: one, or two for 3.13's LOAD_FAST_LOAD_FAST family."""
    arg = instr.arg
    if isinstance(arg, tuple):
        return tuple(_local_name(item) for item in arg)
    return (_local_name(arg),)


@functools.lru_cache(maxsize=512)
def code_info(code: types.CodeType) -> CodeInfo:
    """Decode `code` once (cached per code object)."""
    bytecode = Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    instructions: list[Instr] = []
    label_index: dict[Label, int] = {}
    in_try: set[int] = set()
    handlers: dict[int, tuple[Label, ...]] = {}
    try_entries: dict[int, TryBegin] = {}
    active: list[TryBegin] = []
    for item in bytecode:
        if isinstance(item, Label):
            label_index[item] = len(instructions)
        elif isinstance(item, TryBegin):
            active.append(item)
        elif isinstance(item, TryEnd):
            if item.entry in active:
                active.remove(item.entry)
        elif isinstance(item, Instr):
            if active:
                in_try.add(len(instructions))
                handlers[len(instructions)] = tuple(t.target for t in active if isinstance(t.target, Label))
                try_entries[len(instructions)] = active[-1]
            instructions.append(item)
    return CodeInfo(code, tuple(instructions), label_index, frozenset(in_try), handlers, try_entries)
