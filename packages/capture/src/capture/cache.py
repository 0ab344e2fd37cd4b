"""The code cache: per code object and backend, the compiled entries (first passing guard wins).

`CodeCache` holds them (`DEFAULT_CACHE` is the process's); a call's arguments are bound as its frame
would see them (`bind_frame_arguments`) to check the entries' guards. The call path that looks entries
up, and compiles on a miss, is `CaptureContext` (`context.py`).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import sys
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from capture.bytecode import dialects
from capture.symbolic.shapes import AutomaticDynamic

if TYPE_CHECKING:
    from capture.context import CaptureContext

CompilerFn = Callable[[torch.fx.GraphModule, list[torch.Tensor]], Callable[..., Any]]
FROZEN: contextvars.ContextVar[bool] = contextvars.ContextVar("capture_frozen", default=False)
"""True while `capture.run(fn)` runs: use cached entries only, never compile."""


@dataclass
class CodeState:
    """Cache entries of one code object for one backend."""

    entries: list[Any] = field(default_factory=list)
    eager_reason: str | None = None
    warned: bool = False
    ctx: CaptureContext | None = None
    eager_code: types.CodeType | None = None  # what runs instead of the code when it runs eagerly
    automatic: AutomaticDynamic = field(default_factory=AutomaticDynamic)
    data_arguments: set[str] = field(default_factory=set)
    """For a resume function: paths of its arguments (``L[2]``, ``L[1]['loss']``) that hold run-time data (a float
    the graph before the break read from a tensor, what the breaking instruction computed): read as graph inputs,
    not constants guarded by value (`symbolic/run_time_values.py`)."""
    varying_data: set[str] = field(default_factory=set)
    """The `data_arguments` whose value guard failed (an int there changed between calls): read as inputs too."""
    number_arguments: set[str] = field(default_factory=set)
    """Automatic dynamic numbers: paths of int and float arguments (``L[1]``) whose value guard failed, or that a
    resume function's caller passed such numbers in: read as inputs, not constants guarded by value."""
    specialized_numbers: set[str] = field(default_factory=set)
    """The `number_arguments` a trace needed the value of (a branch, a size): constants again, for good."""

    input_signatures: set[Any] = field(default_factory=set)
    """`input_signature` of the arguments of each call that compiled an entry."""
    same_input_recompiles: int = 0
    """Recompiles for calls whose `input_signature` an earlier compile had (three: a storm, warned once; up to two
    are a cache warming up, or a few configurations of one program)."""
    storm_warned: bool = False  # of a user function (not of its resume functions): `RecompileStormWarning` given

    def note_compile(self, L: Any) -> bool:
        """Record a compile for arguments `L`; True when it is the third recompile on metadata already compiled
        for (a recompile storm: a value the guards read changes between calls)."""
        signature = input_signature(L)
        if signature in self.input_signatures:
            self.same_input_recompiles += 1
        self.input_signatures.add(signature)
        return self.same_input_recompiles == 3

    def note_failed_guard(self, kind: str, source_expr: str) -> None:
        """A recompile: a data argument whose value guard failed varies (`varying_data`)."""
        if kind == "CONSTANT_MATCH" and source_expr in self.data_arguments:
            self.varying_data.add(source_expr)

    def note_changed_numbers(self, constant_values: dict[str, tuple[Any, object]], L: Any) -> None:
        """A recompile: the int and float arguments whose value differs from the one the last entry was compiled for
        (every one, not only the first failing guard's) are `number_arguments` from now on."""
        for index, value in enumerate(L):
            path = f"L[{index}]"
            known = constant_values.get(path)
            if type(value) in (int, float) and known is not None and type(known[1]) is type(value) and \
                    known[1] != value and path not in self.specialized_numbers:
                self.number_arguments.add(path)

    def number_paths(self) -> frozenset[str]:
        """The `number_arguments` read as inputs in the next compile."""
        return frozenset(self.number_arguments - self.specialized_numbers)


@dataclass
class CodeCache:
    """All compiled entries, keyed by code object and backend."""

    states: dict[tuple[types.CodeType, int], CodeState] = field(default_factory=dict)
    resume_wrappers: dict[tuple[Any, ...], Any] = field(default_factory=dict)
    generation: int = 0
    compile_lock: threading.RLock = field(default_factory=threading.RLock)
    """Held while a frame compiles: one compile at a time in the process (tracing uses process-wide
    state, e.g. make_fx's current tracer), and threads that missed together compile the entry once."""

    def state(self, code: types.CodeType, ctx: CaptureContext) -> CodeState:
        """The state for `code` under `ctx`'s backend (created on first use)."""
        key = (code, ctx.backend_key)
        state = self.states.get(key)
        if state is None:
            state = self.states[key] = CodeState(ctx=ctx)
        return state

    def states_for(self, code: types.CodeType) -> list[CodeState]:
        """Every backend's state for `code`."""
        return [state for (c, _), state in self.states.items() if c is code]

    def clear(self) -> None:
        """Forget everything (what `capture.reset()` does)."""
        self.states.clear()
        self.resume_wrappers.clear()
        self.generation += 1


def input_signature(values: Any, depth: int = 0) -> Any:
    """What a call's arguments look like without their values: tensors by type, dtype, device, shape, strides and
    requires_grad; lists, tuples and dicts by their length (keys) and items, two levels deep; anything else by its
    type (ints and floats too: a recompile on a changed number is one on the same metadata)."""
    if isinstance(values, torch.Tensor):
        return (type(values), values.dtype, values.device, tuple(values.shape), values.stride()
                if values.layout == torch.strided else None, values.requires_grad)
    if type(values) in (list, tuple) and depth < 3 and len(values) <= 64:
        return (type(values), tuple(input_signature(v, depth + 1) for v in values))
    if type(values) is dict and depth < 3 and len(values) <= 64:
        return (dict, tuple((repr(k), input_signature(v, depth + 1)) for k, v in values.items()))
    return type(values)


DEFAULT_CACHE = CodeCache()
"""The process-wide code cache (the role CPython's per-code `co_extra` plays for TorchDynamo)."""


def bind_frame_arguments(fn: types.FunctionType, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """Argument values in `co_varnames` order, as the frame would see them.

    Bound directly from the code object and the defaults (``model(x)``, ``model(**inputs)`` reaching
    ``forward(self, input_ids, attention_mask=None, **kwargs)``), without `inspect`, which costs ~50 us
    a call; `inspect` binds (and raises its TypeError) only when a call is not valid.
    """
    code = fn.__code__
    fast = _bind_directly(fn, code, args, kwargs)
    if fast is not None:
        return fast
    bound = inspect.signature(fn, follow_wrapped=False).bind(*args, **kwargs)
    bound.apply_defaults()
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return [bound.arguments[name] for name in code.co_varnames[:nargs]]


_MISSING: Any = object()


def _bind_directly(fn: types.FunctionType, code: types.CodeType, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> list[Any] | None:
    """`bind_frame_arguments` as Python binds a call; None when the call is not valid (`inspect` raises)."""
    count = code.co_argcount
    kwonly = code.co_kwonlyargcount
    varargs = code.co_flags & 0x04
    varkw = code.co_flags & 0x08
    if len(args) > count and not varargs:
        return None  # too many arguments
    values = list(args[:count])
    values += [_MISSING] * (count - len(values)) + [_MISSING] * kwonly
    extra: dict[str, Any] = {}
    if kwargs:
        names = code.co_varnames
        first_named = code.co_posonlyargcount  # positional-only parameters take no keyword
        for key, value in kwargs.items():
            try:
                position = names.index(key, first_named, count + kwonly)
            except ValueError:
                if not varkw:
                    return None  # an unexpected keyword
                extra[key] = value
                continue
            if values[position] is not _MISSING:
                return None  # a parameter given twice
            values[position] = value
    if any(value is _MISSING for value in values):  # by identity: `in` would compare tensors with ==
        defaults = fn.__defaults__ or ()
        first_default = count - len(defaults)
        kwdefaults = fn.__kwdefaults__ or {}
        for position, value in enumerate(values):
            if value is not _MISSING:
                continue
            if position < count:
                if position < first_default:
                    return None  # a required argument is missing
                values[position] = defaults[position - first_default]
            else:
                name = code.co_varnames[position]
                if name not in kwdefaults:
                    return None
                values[position] = kwdefaults[name]
    if varargs:
        values.append(tuple(args[count:]))
    if varkw:
        values.append(extra)
    return values


SUPPORTED_PYTHONS = dialects.SUPPORTED
UNSUPPORTED_PYTHON = (f"capture supports Python {', '.join('.'.join(map(str, v)) for v in SUPPORTED_PYTHONS)}; "
                       f"on Python {sys.version_info.major}.{sys.version_info.minor} compiled functions run eagerly")


def python_supported() -> bool:
    """Whether capture can rewrite this interpreter's bytecode (elsewhere every function runs eagerly)."""
    return sys.version_info[:2] in SUPPORTED_PYTHONS


@functools.cache
def warn_unsupported_python() -> None:
    """Say once per process that nothing is compiled on this Python."""
    warnings.warn(UNSUPPORTED_PYTHON, RuntimeWarning, stacklevel=6)


def run_eagerly(fn: types.FunctionType, state: CodeState, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `fn` in plain Python: its own code, or the copy whose breaking call still captures the callee."""
    code = state.eager_code
    if code is None:
        return fn(*args, **kwargs)
    copy = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy(*args, **kwargs)
