"""What generated code raises when a runtime check fails, so that it raises what eager PyTorch raises.

Two checks exist. An indirect index (``ops.indirect_indexing``: an embedding row, a gather position,
an index tensor's value) must lie in its dimension's range: eager raises ``IndexError`` for
``x[i]``, ``embedding``, ``index_select``, ``index_put`` and ``put``, ``RuntimeError`` for
``gather``, ``scatter*`` and ``index_add``. The lowering of each op says which with an
:class:`IndexCheck`, which code generators carry into their kernels. An integer ``//``, ``%``,
``fmod`` or truncating division by zero raises ``RuntimeError("ZeroDivisionError")`` in eager:
:class:`DivisionCheck`. Float division by zero is not checked (it gives inf and nan, as in eager).

A code generator checks the value in the kernel, records the failure instead of reading out of
bounds or trapping (SIGFPE), and raises :meth:`IndexCheck.exception` from Python after the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["DivisionCheck", "IndexCheck", "RuntimeCheck", "failed_check", "user_location"]

_ERRORS: dict[str, type[Exception]] = {"IndexError": IndexError, "RuntimeError": RuntimeError}
_MARK = "kiln_runtime_check"  # the attribute naming the check an exception reports


def failed_check(error: BaseException) -> IndexCheck | DivisionCheck | None:
    """The runtime check whose failure ``error`` reports (None: some other error).

    A caller that would treat a failing first run as a compiler problem (the frontend's fallback to
    eager) re-raises these instead: the user's data is wrong, not the compiled code.
    """
    return getattr(error, _MARK, None)


def user_location(node: torch.fx.Node | None) -> str:
    """``File "model.py", line 12, in forward``: the user's line that produced ``node`` ('' if unknown)."""
    if node is None:
        return ""
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    return lines[-1] if lines else ""


def _context(parts: list[str]) -> str:
    kept = [part for part in parts if part]
    return f" ({'; '.join(kept)})" if kept else ""


@dataclass(frozen=True)
class IndexCheck:
    """An indirect index that must lie in ``[0, size)`` (after wrapping negative values, where the op
    wraps them), and what eager PyTorch raises when it does not.

    error: the exception eager raises, ``"IndexError"`` or ``"RuntimeError"``.
    op: the ATen op whose index it is (``aten.gather.default``), named in the message.
    dim: the dimension indexed, named in the message (None: not named).
    where: the user's source line (:func:`user_location`).
    """

    error: Literal["IndexError", "RuntimeError"] = "IndexError"
    op: str = ""
    dim: int | None = None
    where: str = ""

    def message(self, value: int | None = None, size: int | str | None = None, kernel: str = "") -> str:
        """``index 12 is out of bounds for dimension 0 with size 10 (aten.gather.default at ...)``."""
        text = "index" + (f" {value}" if value is not None else "") + " is out of bounds"
        if self.dim is not None:
            text += f" for dimension {self.dim}"
        if size is not None:
            text += f" with size {size}"
        place = f"at {self.where}" if self.where else ""
        return text + _context([self.op, place, f"compiled kernel {kernel}" if kernel else ""])

    def exception(self, value: int | None = None, size: int | str | None = None, kernel: str = "") -> Exception:
        """The exception to raise for a failed check: eager's type, with ``value`` and ``size`` when known."""
        error = _ERRORS[self.error](self.message(value, size, kernel))
        setattr(error, _MARK, self)
        return error


@dataclass(frozen=True)
class DivisionCheck:
    """An integer divisor that must not be zero (eager raises ``RuntimeError: ZeroDivisionError``)."""

    error: Literal["RuntimeError"] = "RuntimeError"

    def message(self, kernel: str = "", ops: str = "") -> str:
        """``ZeroDivisionError: integer division or remainder by zero (...)``, as eager's message starts."""
        return "ZeroDivisionError: integer division or remainder by zero" + _context(
            [f"compiled kernel {kernel}" if kernel else "", f"computing {ops}" if ops else ""]
        )

    def exception(self, kernel: str = "", ops: str = "") -> Exception:
        """The ``RuntimeError`` to raise."""
        error = RuntimeError(self.message(kernel, ops))
        setattr(error, _MARK, self)
        return error


RuntimeCheck = IndexCheck | DivisionCheck
"""Either kind of check a kernel may fail."""
