"""Guards: the checks that decide whether a cached graph may be reused for a call.

A `GuardSet` collects guards while the bytecode is interpreted; `compile_guards` turns them into
one generated Python function ``check(L, G, C) -> bool`` (fast path), and `first_failure`
names the first guard that fails (slow path, used for recompile logs and warnings).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from capture.sources import Source

GuardFn = Callable[[Any, Any, Any], bool]


@dataclass(frozen=True)
class Guard:
    """One check: `code` is a Python boolean expression over L, G, C and named constants."""

    kind: str
    source_expr: str
    code: str
    description: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.description}"


@dataclass
class GuardSet:
    """The guards of one cache entry, plus the constants their code refers to."""

    guards: list[Guard] = field(default_factory=list)
    constants: dict[str, object] = field(default_factory=dict)
    _seen: set[tuple[str, str]] = field(default_factory=set)

    def constant(self, value: object) -> str:
        """Name under which `value` is visible to guard code."""
        name = f"_k{len(self.constants)}"
        self.constants[name] = value
        return name

    def add(self, kind: str, source: Source | str, code: str, description: str) -> None:
        """Add a guard unless an identical one is already present."""
        expr = source if isinstance(source, str) else source.expr()
        key = (kind, code)
        if key in self._seen:
            return
        self._seen.add(key)
        self.guards.append(Guard(kind, expr, code, description))

    def type_is(self, source: Source, value: object) -> None:
        """Guard `type(source) is type(value)`."""
        t = self.constant(type(value))
        self.add("TYPE_MATCH", source, f"type({source.expr()}) is {t}",
                 f"type({source.expr()}) is {type(value).__qualname__}")

    def identity(self, source: Source, value: object) -> None:
        """Guard `source is value` (by id; the value is kept alive by the entry)."""
        self.constant(value)  # keep alive so the id cannot be reused
        self.add("ID_MATCH", source, f"id({source.expr()}) == {id(value)}",
                 f"{source.expr()} is the object {_short(value)}")

    def equals(self, source: Source, value: object) -> None:
        """Guard type and value of a Python constant."""
        expr = source.expr()
        if value is None or isinstance(value, bool):
            self.add("CONSTANT_MATCH", source, f"{expr} is {value!r}", f"{expr} is {value!r}")
            return
        t = self.constant(type(value))
        v = self.constant(value)
        self.add("CONSTANT_MATCH", source, f"type({expr}) is {t} and {expr} == {v}", f"{expr} == {value!r}")

    def tensor(self, source: Source, value: torch.Tensor) -> None:
        """Guard a tensor's type, dtype, device, shape, strides and requires_grad."""
        expr = source.expr()
        t = self.constant(type(value))
        d = self.constant(value.dtype)
        # `__t` names the tensor once, so the source expression is evaluated once per guard.
        parts = [f"type(__t := {expr}) is {t}", f"__t.dtype is {d}"]
        if value.device.type == "cpu":
            parts.append("__t.is_cpu")
        else:
            parts.append(f"__t.device == {self.constant(value.device)}")
        parts.append(f"__t.shape == {self.constant(torch.Size(value.shape))}")
        parts.append(f"__t.stride() == {tuple(value.stride())!r}")
        parts.append(f"__t.requires_grad is {value.requires_grad}")
        description = (
            f"{expr} is a {type(value).__name__}(dtype={value.dtype}, device={value.device}, "
            f"shape={list(value.shape)}, stride={list(value.stride())}, requires_grad={value.requires_grad})"
        )
        self.add("TENSOR_MATCH", source, " and ".join(parts), description)

    def grad_mode(self, enabled: bool) -> None:
        """Guard the global grad mode."""
        g = self.constant(torch.is_grad_enabled)
        self.add("GRAD_MODE", "torch.is_grad_enabled()", f"{g}() is {enabled}",
                 f"torch.is_grad_enabled() is {enabled}")


    def autocast_mode(self) -> None:
        """Guard the global autocast state (graphs traced outside autocast must not run inside it)."""
        state = autocast_state()
        f = self.constant(autocast_state)
        s = self.constant(state)
        self.add("AUTOCAST_MODE", "autocast_state()", f"{f}() == {s}", f"autocast state is {state or 'off'}")


def autocast_state() -> tuple[tuple[str, bool, torch.dtype], ...]:
    """(device, enabled, dtype) for CPU and CUDA autocast; empty when no autocast is on (the fast path)."""
    if not torch._C._is_any_autocast_enabled():
        return ()
    return tuple((device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
                 for device in ("cpu", "cuda"))


def _short(value: object) -> str:
    text = repr(value)
    first = text.splitlines()[0] if text else text
    return first[:60] + ("..." if len(first) > 60 or "\n" in text else "")


def compile_guards(guard_set: GuardSet) -> GuardFn:
    """One generated function that checks every guard (short-circuiting)."""
    body = " and ".join(f"({g.code})" for g in guard_set.guards) or "True"
    source = f"def check(L, G, C):\n    try:\n        return {body}\n    except Exception:\n        return False\n"
    namespace: dict[str, Any] = dict(guard_set.constants)
    exec(compile(source, "<capture guards>", "exec"), namespace)
    check: GuardFn = namespace["check"]
    return check


def first_failure(guard_set: GuardSet, L: Any, G: Any, C: Any) -> Guard | None:
    """The first guard that fails for these inputs (None when all pass)."""
    namespace: dict[str, Any] = dict(guard_set.constants)
    namespace.update(L=L, G=G, C=C)
    for guard in guard_set.guards:
        try:
            ok = eval(guard.code, namespace)
        except Exception:
            ok = False
        if not ok:
            return guard
    return None
