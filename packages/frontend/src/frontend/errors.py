"""The errors a user of the frontend can meet, each saying what went wrong and what to do."""

from __future__ import annotations


class KilnError(Exception):
    """Base class of every error raised by Kiln's frontend."""


class InvalidOptionError(KilnError, ValueError):
    """An ``options=`` key or value, a ``mode=`` or a ``config.patch`` argument is not valid."""


class UnknownBackendError(KilnError, ValueError):
    """``backend=`` names no registered backend; the message lists the known ones."""


class BackendCompileError(KilnError, RuntimeError):
    """A backend failed to compile a graph and falling back to eager is switched off."""


class CudaGraphOutputOverwrittenError(KilnError, RuntimeError):
    """A CUDA-graph output was used after a later replay overwrote its memory; the message names the fix."""


def describe_error(error: BaseException) -> str:
    """``Type: message`` on one line, cut to a readable length."""
    text = " ".join(str(error).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
