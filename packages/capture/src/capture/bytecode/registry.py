"""The opcode handler registry, keyed by opname, with the Python versions each handler covers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from capture.bytecode.dialects import CURRENT, NEWEST, Version

if TYPE_CHECKING:
    from capture.symbolic.translator import InstructionTranslator

Instruction = Any
"""A `bytecode.Instr`: its `.arg` is a wide union (int, name, label, enum, tuple) that handlers decode."""
Handler = Callable[["InstructionTranslator", Instruction], None]


@dataclass(frozen=True)
class Registration:
    """One handler and the versions (inclusive) it applies to."""

    opname: str
    handler: Handler
    min_version: Version
    max_version: Version


_ALL: list[Registration] = []
HANDLERS: dict[str, Handler] = {}


def opcode(*opnames: str, min_version: Version = (3, 11), max_version: Version = NEWEST) -> Callable[[Handler], Handler]:
    """Register `handler` for `opnames` on Python versions in [min_version, max_version] (default: to the newest)."""

    def register(handler: Handler) -> Handler:
        for name in opnames:
            registration = Registration(name, handler, min_version, max_version)
            _ALL.append(registration)
            if min_version <= CURRENT <= max_version:
                HANDLERS[name] = handler
        return handler

    return register


# Opcodes the interpreter deliberately does not handle, with the reason. Meeting one is a graph
# break (or, where no resume is possible, the frame runs eagerly), never a crash.
_EXCEPTIONS = "exception groups are not modelled (a graph break)"
_GENERATORS = "generators and coroutines are not captured; their frames run eagerly"
UNSUPPORTED: dict[str, str] = {
    "CHECK_EG_MATCH": _EXCEPTIONS,
    "PREP_RERAISE_STAR": _EXCEPTIONS, "CLEANUP_THROW": _EXCEPTIONS,
    "GET_AWAITABLE": _GENERATORS, "GET_AITER": _GENERATORS, "GET_ANEXT": _GENERATORS,
    "BEFORE_ASYNC_WITH": _GENERATORS, "END_ASYNC_FOR": _GENERATORS, "ASYNC_GEN_WRAP": _GENERATORS,
    "LOAD_ASYNC_GEN_WRAP": _GENERATORS,
    "LOAD_NAME": "module- and class-level code is not captured", "STORE_NAME": "module-level code",
    "DELETE_NAME": "module-level code", "LOAD_CLASSDEREF": "class bodies are not captured",
    "LOAD_FROM_DICT_OR_DEREF": "class bodies are not captured",
    "LOAD_FROM_DICT_OR_GLOBALS": "class bodies are not captured", "LOAD_LOCALS": "class bodies",
    "LOAD_BUILD_CLASS": "class definitions inside captured code", "SETUP_ANNOTATIONS": "class bodies",
    "IMPORT_STAR": "star imports", "PRINT_EXPR": "interactive mode only",
    "DELETE_GLOBAL": "deleting globals", "DELETE_DEREF": "deleting closure variables",
    "DELETE_ATTR": "deleting attributes", "DELETE_SLICE": "deleting slices",
    "CALL_INTRINSIC_2": "exception groups and type parameters",
    "INTERPRETER_EXIT": "never in user code", "CACHE": "inline cache entries are skipped by the decoder",
    "EXTENDED_ARG": "folded into the next instruction by the decoder",
    "JUMP": "pseudo-instruction, never in code objects", "JUMP_NO_INTERRUPT": "pseudo-instruction",
    "SETUP_FINALLY": "pseudo-instruction", "SETUP_CLEANUP": "pseudo-instruction", "SETUP_WITH": "pseudo-instruction",
    "POP_BLOCK": "pseudo-instruction", "LOAD_METHOD": "3.12: a pseudo-instruction (LOAD_ATTR's method bit)", "STORE_FAST_MAYBE_NULL": "pseudo-instruction",
    "LOAD_ZERO_SUPER_ATTR": "pseudo-instruction (super())", "LOAD_ZERO_SUPER_METHOD": "pseudo-instruction (super())",
    "LOAD_SUPER_METHOD": "pseudo-instruction (super())",
    "HAVE_ARGUMENT": "a marker, not an opcode",
    "RESERVED": "reserved", "ENTER_EXECUTOR": "tier-2 optimizer only",
    "EXIT_INIT_CHECK": "3.13: only in the interpreter's shim frame of a specialized `__init__` call",
}


def unsupported_reason(opname: str) -> str | None:
    """Why `opname` is not handled (None when it is handled on this Python)."""
    if opname in HANDLERS:
        return None
    if opname.startswith("INSTRUMENTED_"):
        return "monitoring instrumentation; never in the code objects capture interprets"
    return UNSUPPORTED.get(opname, f"opcode {opname} is not supported by capture")


def handler_for(opname: str) -> Handler | None:
    """The handler of `opname` on this Python, or None."""
    return HANDLERS.get(opname)


def registrations() -> list[Registration]:
    """Every registration, for every version (for tests and docs)."""
    return list(_ALL)
