"""Errors aotgrad raises, each saying what went wrong, where in the user's code, and what to do."""

from __future__ import annotations

import re
import traceback
from types import TracebackType

import torch


class AotGradError(RuntimeError):
    """Base class of every error aotgrad raises on purpose."""


class UnsupportedOperatorError(AotGradError):
    """An ATen op that aotgrad cannot trace: no decomposition and no meta (fake) kernel.

    Attributes:
        op: the operator's name, e.g. ``"mylib::frobnicate"``.
        user_location: ``file:line`` in the user's code, when known.
    """

    def __init__(self, op: str, user_location: str | None, detail: str) -> None:
        self.op = op
        self.user_location = user_location
        where = f" at {user_location}" if user_location else ""
        super().__init__(
            f"aotgrad cannot trace operator `{op}`{where}: it has no decomposition and no meta "
            f"(fake-tensor) kernel ({detail}). Register one with "
            f"`torch.library.register_fake(\"{op}\")`, or keep this call out of the "
            "compiled region."
        )


class TracingError(AotGradError):
    """A graph aotgrad could not turn into functional ATen graphs, with the reason and place."""

    def __init__(self, reason: str, user_location: str | None) -> None:
        self.reason = reason
        self.user_location = user_location
        where = f" (at {user_location})" if user_location else ""
        super().__init__(f"aotgrad could not trace this graph{where}: {reason}")


class EagerOnlyWriteError(TracingError):
    """An in-place write that only eager can make: into a tensor whose elements overlap in memory
    (an `as_strided` view written element by element, in eager's own loop order), or one that
    torch's functionalization cannot fold back (through an `expand`ed narrow integer tensor).

    The user's program is valid and eager defines its result, so aotgrad runs such a graph eagerly
    whatever `fallback_to_eager` says, and logs this error as the reason.
    """


_FRAME_LINE = re.compile(r'File "([^"]+)", line (\d+)')
_INTERNAL_PATH_PARTS = ("/torch/", "/src/aotgrad/", "/site-packages/", "/contextlib.py")


def _is_user_file(path: str) -> bool:
    return not path.startswith("<") and not any(part in path for part in _INTERNAL_PATH_PARTS)


def location_from_stack_trace(stack_trace: str | None) -> str | None:
    """The innermost user ``file:line`` in an FX node's ``meta["stack_trace"]`` text, if any."""
    if not stack_trace:
        return None
    found = [f"{path}:{line}" for path, line in _FRAME_LINE.findall(stack_trace) if _is_user_file(path)]
    return found[-1] if found else None


def location_from_traceback(tb: TracebackType | None) -> str | None:
    """The innermost user ``file:line`` in a Python traceback, if any."""
    found = [f"{f.filename}:{f.lineno}" for f in traceback.extract_tb(tb) if _is_user_file(f.filename)]
    return found[-1] if found else None


def location_from_current_stack() -> str | None:
    """The innermost user ``file:line`` on the current Python stack (while tracing a user's op)."""
    found = [f"{f.filename}:{f.lineno}" for f in traceback.extract_stack() if _is_user_file(f.filename)]
    return found[-1] if found else None


_NO_FAKE_KERNEL_MESSAGES = (
    re.compile(r"no fake impl registered for <CustomOpDef\(([\w.:]+)\)>"),
    re.compile(r"Could not run '([\w.:]+)' with arguments from the 'Meta' backend"),
    re.compile(r"([\w.:]+): attempted to run this operator with Meta tensors"),
)


def unsupported_op_name(error: BaseException) -> str | None:
    """The ATen op that a fake-tensor failure is about, or None when it is another failure."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    kinds = (UnsupportedOperatorException, DynamicOutputShapeException, DataDependentOutputException)
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, kinds):
            func = current.func if hasattr(current, "func") else (current.args[0] if current.args else None)
            if isinstance(func, torch._ops.OpOverload):
                return func._schema.name
            return str(func)
        for pattern in _NO_FAKE_KERNEL_MESSAGES:
            match = pattern.search(str(current))
            if match:
                return match.group(1)
        current = current.__cause__ or current.__context__
    return None
