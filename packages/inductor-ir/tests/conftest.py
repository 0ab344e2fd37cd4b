"""Makes this folder's helper modules (inductor_ir_testing, inductor_ir_reference_backend) importable."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
