"""Guards: the checks that decide whether a cached graph may be reused for a call.

A `GuardSet` collects guards while the bytecode is interpreted; `compile_guards` turns them into
one generated Python function ``check(L, G, C) -> bool`` (fast path), and `first_failure`
names the first guard that fails (slow path, used for recompile logs and warnings).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.nn.modules import module as _MODULE_IMPL

from capture.errors import UserLocation
from capture.guard_compiler import HOOK_DICTS, ModuleFacts, compile_guard_function, module_hooks, tensor_state
from capture.sources import ObjectSource, Source

GuardFn = Callable[[Any, Any, Any], bool]
global_module_hooks = operator.attrgetter(*(name for name in (
    "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks", "_global_backward_pre_hooks")
    if hasattr(_MODULE_IMPL, name)))
"""The process-wide module hook dicts, read from `torch.nn.modules.module` on each check."""
GUARD_NAMESPACE: dict[str, Any] = {"torch": torch, "math": math}
"""Names guard code may use besides its constants (rendered size expressions call ``torch.sym_float``, ``math.floor``)."""


@dataclass(frozen=True)
class Guard:
    """One check: `code` is a Python boolean expression over L, G, C and named constants.

    Attributes:
        kind: TENSOR_MATCH, CONSTANT_MATCH, ID_MATCH, TYPE_MATCH, SHAPE, SIZE_RANGE, ...
        source_expr: the value it checks, as an expression over L (arguments), G (globals), C (cells).
        code: the Python check; description: the same, readable.
        location: the user source line whose code installed the guard (None: not from user code).
        subjects: expressions whose values a failure report shows (the sizes a SHAPE guard reads).
    """

    kind: str
    source_expr: str
    code: str
    description: str
    location: UserLocation | None = None
    subjects: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.kind}: {self.description}"

    def where(self) -> str:
        """``file:line: source text`` of the line that installed the guard ('' when unknown)."""
        location = self.location
        if location is None:
            return ""
        text = location.source_line
        return f"{location.filename}:{location.lineno}" + (f": {text}" if text else "")


@dataclass
class GuardSet:
    """The guards of one cache entry, plus the constants their code refers to."""

    guards: list[Guard] = field(default_factory=list)
    constants: dict[str, object] = field(default_factory=dict)
    _seen: set[tuple[str, str]] = field(default_factory=set)  # (kind, source: description)
    locate: Callable[[], UserLocation | None] | None = None
    """Where the trace is in the user's code (set by the translator): the location of new guards."""
    tracked: dict[str, tuple[Source, object]] = field(default_factory=dict)
    """Modules, parameters and buffers guarded by identity, by expression (for the module-tree check)."""
    constant_values: dict[str, tuple[Source, object]] = field(default_factory=dict)
    """Values of CONSTANT_MATCH guards, by expression (attributes of proven modules are checked in one batch)."""
    facts: ModuleFacts = field(default_factory=ModuleFacts)
    """What MODULE_HOOKS and NO_ATTRIBUTE guards compare (those of proven modules are checked in one batch)."""

    _names: dict[int, str] = field(default_factory=dict)  # id(value) -> its constant's name

    def constant(self, value: object) -> str:
        """Name under which `value` is visible to guard code (one name per object: the same object named
        twice gives one guard, not two that differ only in the constant's name)."""
        name = self._names.get(id(value))
        if name is not None and self.constants.get(name) is value:
            return name
        name = f"_k{len(self.constants)}"
        self.constants[name] = value
        self._names[id(value)] = name
        return name

    def add(self, kind: str, source: Source | str, code: str, description: str, *,
            location: UserLocation | None = None, subjects: tuple[str, ...] | None = None) -> None:
        """Add a guard unless an identical one is already present.

        `location` defaults to where the trace currently is (`locate`); `subjects` to the source.
        """
        expr = source if isinstance(source, str) else source.expr()
        # Keyed on what is checked, not on the code: the same constant read twice would get fresh
        # constant names (`_k6`, `_k8`) and be checked twice on every call.
        key = (kind, f"{expr}: {description}")
        if key in self._seen:
            return
        self._seen.add(key)
        if location is None and self.locate is not None:
            location = self.locate()
        self.guards.append(Guard(kind, expr, code, description, location, (expr,) if subjects is None else subjects))

    def type_is(self, source: Source, value: object) -> None:
        """Guard `type(source) is type(value)`."""
        if isinstance(source, ObjectSource):  # the object itself, held by the entry: nothing to check
            return
        t = self.constant(type(value))
        self.add("TYPE_MATCH", source, f"type({source.expr()}) is {t}",
                 f"type({source.expr()}) is {type(value).__qualname__}")

    def identity(self, source: Source, value: object) -> None:
        """Guard `source is value` (by id; the value is kept alive by the entry)."""
        self.constant(value)  # keep alive so the id cannot be reused
        if isinstance(value, torch.nn.Module):
            self.tracked.setdefault(source.expr(), (source, value))
        if isinstance(source, ObjectSource) and self.constants.get(source.expr()) is value:
            return  # the object itself, held by the entry: always the same
        self.add("ID_MATCH", source, f"id({source.expr()}) == {id(value)}",
                 f"{source.expr()} is the object {_short(value)}")

    def module_tensor(self, source: Source, value: torch.Tensor) -> None:
        """Guard a parameter or buffer read from a module: the same object, same requires_grad/dtype/device."""
        expr = source.expr()
        self.constant(value)  # keep alive so the id cannot be reused
        self.tracked.setdefault(expr, (source, value))
        state = self.constant(tensor_state(value))
        self.add("PARAM_MATCH", source, f"id({expr}) == {id(value)} and {self.constant(tensor_state)}({expr}) == {state}",
                 f"{expr} is the tensor {_describe_value(value)}")

    def hooks_of(self, source: Source, module: torch.nn.Module) -> None:
        """Guard a called module's forward/backward hook dicts: a hook added or removed later recompiles."""
        expr = source.expr()
        live = module_hooks(module)
        snapshot = tuple(type(hooks)(hooks) for hooks in live)
        code = f"{self.constant(module_hooks)}({expr}) == {self.constant(snapshot)}"
        self.facts.hooks[code] = (live, snapshot)
        count = sum(len(hooks) for hooks in snapshot)
        self.add("MODULE_HOOKS", source, code, f"{expr} has the same {count} hook(s) ({', '.join(HOOK_DICTS)})")

    def global_module_hooks(self) -> None:
        """Guard the global module hooks (`register_module_forward_hook` and friends) of this process."""
        snapshot = tuple(type(hooks)(hooks) for hooks in global_module_hooks(_MODULE_IMPL))
        self.add("GLOBAL_MODULE_HOOKS", "global module hooks",
                 f"{self.constant(global_module_hooks)}({self.constant(_MODULE_IMPL)}) == {self.constant(snapshot)}",
                 f"the same {sum(len(h) for h in snapshot)} global module hook(s)")

    def absent_attribute(self, source: Source, name: str) -> None:
        """Guard that `name` is not in the instance `__dict__` of the object at `source` (a class attribute is used)."""
        check = f"{name!r} not in {source.expr()}.__dict__"
        self.facts.absent[check] = name
        self.add("NO_ATTRIBUTE", source, check, check)

    def equals(self, source: Source, value: object) -> None:
        """Guard type and value of a Python constant."""
        expr = source.expr()
        self.constant_values.setdefault(expr, (source, value))
        if value is None or isinstance(value, bool):
            self.add("CONSTANT_MATCH", source, f"{expr} is {value!r}", f"{expr} is {value!r}")
            return
        t = self.constant(type(value))
        v = self.constant(value)
        code = f"type({expr}) is {t} and {expr} == {v}"
        if type(value) is float and value == 0.0:  # -0.0 == 0.0, but 1 / (x * -0.0) is -inf
            code += f" and math.copysign(1.0, {expr}) == {math.copysign(1.0, value)!r}"
        self.add("CONSTANT_MATCH", source, code, f"{expr} == {value!r}")

    def tensor(self, source: Source, value: torch.Tensor, dynamic_dims: frozenset[int] = frozenset(),
               location: UserLocation | None = None) -> None:
        """Guard a tensor's type, dtype, device, shape, strides and requires_grad.

        With `dynamic_dims`, the sizes of those dims (and the strides) are left to the size guards
        (`capture.symbolic.shapes.shape_guards`); the rank and the other sizes are checked here.
        """
        if dynamic_dims:
            self._dynamic_tensor(source, value, dynamic_dims, location)
            return
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
        self.add("TENSOR_MATCH", source, " and ".join(parts), description, location=location)

    def _dynamic_tensor(self, source: Source, value: torch.Tensor, dynamic_dims: frozenset[int],
                        location: UserLocation | None) -> None:
        expr = source.expr()
        parts = [f"type(__t := {expr}) is {self.constant(type(value))}", f"__t.dtype is {self.constant(value.dtype)}"]
        parts.append("__t.is_cpu" if value.device.type == "cpu" else f"__t.device == {self.constant(value.device)}")
        parts.append(f"__t.dim() == {value.dim()}")
        parts += [f"__t.size({d}) == {int(n)}" for d, n in enumerate(value.shape) if d not in dynamic_dims]
        parts.append(f"__t.requires_grad is {value.requires_grad}")
        shape = ["*" if d in dynamic_dims else str(int(n)) for d, n in enumerate(value.shape)]
        description = (f"{expr} is a {type(value).__name__}(dtype={value.dtype}, device={value.device}, "
                       f"shape=[{', '.join(shape)}] (* dynamic), requires_grad={value.requires_grad})")
        self.add("TENSOR_MATCH", source, " and ".join(parts), description, location=location)

    def grad_mode(self, enabled: bool) -> None:
        """Guard the global grad mode."""
        g = self.constant(torch.is_grad_enabled)
        self.add("GRAD_MODE", "torch.is_grad_enabled()", f"{g}() is {enabled}",
                 f"torch.is_grad_enabled() is {enabled}")

    def default_dtype(self) -> None:
        """Guard the global default dtype (factory functions and Python floats become tensors of it)."""
        dtype = torch.get_default_dtype()
        self.add("DEFAULT_DTYPE", "torch.get_default_dtype()",
                 f"{self.constant(torch.get_default_dtype)}() is {self.constant(dtype)}",
                 f"torch.get_default_dtype() is {dtype}")

    def call_result(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: object) -> None:
        """Guard a query of global state answered at trace time (``torch.are_deterministic_algorithms_enabled()``,
        ``torch.get_num_threads()``): the same call, asked again, gives the same answer."""
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
        module = getattr(fn, "__module__", None) or ""
        written = f"{'torch' if module.startswith('torch') else module}.{name}".lstrip(".")
        shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        call = f"{self.constant(fn)}(*{self.constant(tuple(args))}, **{self.constant(dict(kwargs))})"
        self.add("GLOBAL_STATE", f"{written}({shown})", f"{call} == {self.constant(value)}",
                 f"{written}({shown}) == {value!r}")

    def autocast_mode(self) -> None:
        """Guard the global autocast state (graphs traced outside autocast must not run inside it)."""
        state = autocast_state()
        if not state:  # the common case, checked with one C call instead of `autocast_state()`
            off = self.constant(torch._C._is_any_autocast_enabled)
            self.add("AUTOCAST_MODE", "autocast_state()", f"{off}() is False", "autocast state is off")
            return
        f = self.constant(autocast_state)
        s = self.constant(state)
        self.add("AUTOCAST_MODE", "autocast_state()", f"{f}() == {s}", f"autocast state is {state}")


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
    """One generated function that checks every guard (see `capture.guard_compiler`)."""
    return compile_guard_function(guard_set.guards, guard_set.constants, guard_set.tracked, GUARD_NAMESPACE,
                                  guard_set.constant_values, guard_set.facts)


def compile_guards_plainly(guard_set: GuardSet) -> GuardFn:
    """The reference check: every guard's code in order, no batching (tests compare it with the fast one)."""
    body = " and ".join(f"({g.code})" for g in guard_set.guards) or "True"
    source = f"def check(L, G, C):\n    try:\n        return {body}\n    except Exception:\n        return False\n"
    namespace: dict[str, Any] = dict(GUARD_NAMESPACE)
    namespace.update(guard_set.constants)
    exec(compile(source, "<capture guards>", "exec"), namespace)
    check: GuardFn = namespace["check"]
    return check


def _namespace(guard_set: GuardSet, L: Any, G: Any, C: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = dict(GUARD_NAMESPACE)
    namespace.update(guard_set.constants)
    namespace.update(L=L, G=G, C=C)
    return namespace


def first_failure(guard_set: GuardSet, L: Any, G: Any, C: Any) -> Guard | None:
    """The first guard that fails for these inputs (None when all pass)."""
    namespace = _namespace(guard_set, L, G, C)
    for guard in guard_set.guards:
        try:
            ok = eval(guard.code, namespace)
        except Exception:
            ok = False
        if not ok:
            return guard
    return None


def failing_values(guard_set: GuardSet, guard: Guard, L: Any, G: Any, C: Any) -> str:
    """What the values `guard` checks are on this call, e.g. ``L[0].size(0) = 3``."""
    namespace = _namespace(guard_set, L, G, C)
    shown: list[str] = []
    for subject in guard.subjects:
        try:
            value = eval(subject, namespace)
        except Exception as error:
            shown.append(f"{subject} cannot be read ({type(error).__name__})")
            continue
        shown.append(f"{subject} = {_describe_value(value)}")
    return ", ".join(shown)


def _describe_value(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return (f"{type(value).__name__}(dtype={value.dtype}, device={value.device}, shape={list(value.shape)}, "
                f"stride={list(value.stride())}, requires_grad={value.requires_grad})")
    return _short(value)
