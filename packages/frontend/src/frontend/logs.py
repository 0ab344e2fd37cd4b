"""KILN_LOGS: the events Kiln logs, each through its own `logging` logger ``kiln.<event>``.

Events: graph_breaks, recompiles, guards (from capture), fallbacks (a graph that runs eagerly
because a backend could not compile it) and compile (one line per compiled graph). An event named
in ``config.logs`` is logged at WARNING level so it shows without any logging setup; others at
DEBUG, so a user can still turn them on with the standard ``logging`` configuration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

_HANDLER_INSTALLED: set[str] = set()


def event_logger(event: str) -> logging.Logger:
    """The logger of one Kiln event (``kiln.graph_breaks``, ``kiln.recompiles``, ...)."""
    return logging.getLogger(f"kiln.{event}")


def _ensure_visible(logger: logging.Logger) -> None:
    """Give the logger a stderr handler once, unless logging is already configured for it."""
    if logger.name in _HANDLER_INSTALLED or logger.hasHandlers():
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
    logger.addHandler(handler)
    _HANDLER_INSTALLED.add(logger.name)


@dataclass(frozen=True)
class EventLog:
    """Logs Kiln events, loudly for the events the user asked for (``config.logs``).

    `sink`, when given, also receives every event (the compile report records them).
    """

    enabled: frozenset[str]
    sink: Callable[[str, str], None] | None = None

    def emit(self, event: str, message: str) -> None:
        """Log `message` under `event`."""
        if self.sink is not None:
            self.sink(event, message)
        logger = event_logger(event)
        if event in self.enabled:
            _ensure_visible(logger)
            logger.warning(message)
        else:
            logger.debug(message)

    def wants(self, event: str) -> bool:
        """Whether the user asked for `event` (to skip building expensive messages otherwise)."""
        return event in self.enabled or event_logger(event).isEnabledFor(logging.DEBUG)
