"""The code capture reads as a library instead of tracing into it: the standard library and known
non-PyTorch libraries (their functions run at trace time or break the graph)."""

from __future__ import annotations

import sys
import types


def is_stdlib_or_skipped(fn: types.FunctionType) -> bool:
    """True for functions capture does not trace into (stdlib and known non-PyTorch libraries)."""
    module = (getattr(fn, "__module__", None) or "").split(".")[0]
    return module in sys.stdlib_module_names or module in SKIPPED_LIBRARIES


SKIPPED_LIBRARIES = frozenset({"numpy", "scipy", "pandas", "sklearn", "matplotlib", "PIL", "cv2", "tqdm", "einops",
                               "pytest", "_pytest", "IPython", "jax", "tensorflow", "capture"})
