"""Makes this folder's helper modules (inductor_ir_testing, inductor_ir_reference_backend) importable,
and checks the IR of every graph these tests compile (`InductorIRConfig.check_ir`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import inductor_ir

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def _check_ir() -> Iterator[None]:
    """`compile_graph` without a config runs `Program.check()` and `Schedule.check()` after its passes."""
    with inductor_ir.InductorIRConfig.patch_defaults(check_ir=True):
        yield
