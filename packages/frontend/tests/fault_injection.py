"""Test-only faults in inductor_ir's lowerings, to exercise repro scripts and the minifier.

`break_sin` makes the lowering of ``aten.sin`` build IR whose body raises (compiling any graph
with a sine fails); `wrong_sin` lowers ``aten.sin`` as a cosine (the kernel computes wrong values).
Both change the process's lowering registry: tests undo them with ``monkeypatch``; a repro script
run as a subprocess gets the same fault by ``python -c "import fault_injection; ...; runpy..."``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import MutableMapping
from typing import Any

import torch

from inductor_ir.lowering.registry import LOWERINGS

SIN = torch.ops.aten.sin.default
COS = torch.ops.aten.cos.default
MESSAGE = "deliberately broken lowering of aten.sin"


def broken_sin_lowering() -> Any:
    """A lowering of aten.sin whose IR raises `MESSAGE` when its body is traced."""
    original = LOWERINGS[SIN]

    def broken(ctx: Any, x: Any) -> Any:
        node = original(ctx, x)

        def inner(index: Any) -> Any:
            raise RuntimeError(MESSAGE)

        return dataclasses.replace(node, inner_fn=inner)

    return broken


def break_sin(registry: MutableMapping[Any, Any] = LOWERINGS) -> None:
    """Install `broken_sin_lowering` (in this process)."""
    registry[SIN] = broken_sin_lowering()


def wrong_sin(registry: MutableMapping[Any, Any] = LOWERINGS) -> None:
    """Lower aten.sin as aten.cos (in this process)."""
    registry[SIN] = LOWERINGS[COS]


def run_with_fault(fault: str, script: str) -> list[str]:
    """The command line running repro `script` as ``__main__`` with `fault` ("break_sin", "wrong_sin") installed."""
    import sys

    code = f"import runpy, fault_injection; fault_injection.{fault}(); runpy.run_path({script!r}, run_name='__main__')"
    return [sys.executable, "-c", code]
