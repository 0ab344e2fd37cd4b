"""Makes `capture_helpers` (this folder's shared test helpers) importable under importlib mode."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
