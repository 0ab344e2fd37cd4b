"""Error classes and the records that point into the user's code."""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field


@dataclass(frozen=True)
class UserLocation:
    """A place in the user's code: file, line, function name and the line's source text."""

    filename: str
    lineno: int
    function: str

    @property
    def source_line(self) -> str:
        """The stripped text of the line, or '' when the file cannot be read."""
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        return f'File "{self.filename}", line {self.lineno}, in {self.function}\n    {self.source_line}'


@dataclass(frozen=True)
class BreakReason:
    """Why a graph ended early, and where: `user_stack[-1]` is the innermost frame."""

    reason: str
    user_stack: tuple[UserLocation, ...] = field(default_factory=tuple)

    @property
    def location(self) -> UserLocation | None:
        """The innermost user frame of the break (where the unsupported code is)."""
        return self.user_stack[-1] if self.user_stack else None

    def __str__(self) -> str:
        where = self.location
        text = self.reason
        if where is not None:
            text += f"\n  at {where.filename}:{where.lineno} in {where.function}: {where.source_line}"
        return text


class CaptureError(Exception):
    """Base class of every error `capture` raises on purpose."""


class GraphBreakError(CaptureError):
    """Raised by `nopython=True` and `export` when the code cannot be captured as one graph."""

    def __init__(self, reason: BreakReason) -> None:
        self.reason = reason
        where = reason.location
        if where is None:
            message = f"graph break: {reason.reason}"
        else:
            message = (
                f"graph break in {where.function} at {where.filename}:{where.lineno}\n"
                f"    {where.source_line}\n"
                f"reason: {reason.reason}\n"
                "hint: move this code out of the captured function, or run without nopython/export "
                "to let capture split the graph here"
            )
        super().__init__(message)


class BackendCompilerError(CaptureError):
    """The backend raised while compiling a captured graph (the cause is chained)."""


class InternalCaptureError(CaptureError):
    """A failure of the capture machinery itself (a bug in `capture`, not in the user's code)."""


class RecompileLimitWarning(UserWarning):
    """Warned once per code object when `cache_size_limit` is hit and the function runs eagerly."""


class RecompileStormWarning(UserWarning):
    """Warned once per code object when it recompiles again for calls whose inputs have the metadata of calls it
    already compiled for (tensors of the same type, dtype, device, shape, strides and requires_grad): a value it
    reads changes between calls (a counter, a growing dict). Names the failing guard, its value now and its line."""
