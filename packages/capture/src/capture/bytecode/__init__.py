"""Opcode handlers of the symbolic interpreter (one module per family) and bytecode generation."""

from capture.bytecode.registry import HANDLERS, UNSUPPORTED, handler_for

__all__ = ["HANDLERS", "UNSUPPORTED", "handler_for"]

# Importing the families registers their handlers.
from capture.bytecode import (  # noqa: F401
    calls,
    containers,
    control_flow,
    exceptions,
    loads_stores,
    matching,
    operators,
    stack,
)
