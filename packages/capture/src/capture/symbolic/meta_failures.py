"""Keeps torch's fake-tensor log quiet about ops whose meta function fails while capture traces.

When an op fails on fake tensors (``x @ w`` with mismatched sizes), capture ends the graph before
that op and runs it eagerly, so the user gets the op's own exception at their line. torch's
`FakeTensorMode` also logs that failure, with its traceback, at ERROR level before re-raising it:
a page of internals printed ahead of the user's error. While `quiet_meta_failures` is active, that
one log record is dropped; other fake-tensor records, and the record outside capture, are kept.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator

_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("capture_quiet_meta_failures", default=False)
_MESSAGE = "failed while attempting to run meta for"


class _MetaFailureFilter(logging.Filter):
    """Drops fake-tensor "failed while attempting to run meta" records while capture is tracing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_ACTIVE.get() and str(record.msg).startswith(_MESSAGE))


_FILTER = _MetaFailureFilter()


@contextlib.contextmanager
def quiet_meta_failures() -> Iterator[None]:
    """Within the block, torch's fake-tensor logger does not print meta-function failures."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    token = _ACTIVE.set(True)
    try:
        yield
    finally:
        _ACTIVE.reset(token)
