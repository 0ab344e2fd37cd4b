"""Loads generated kernel source as a Python module from a file, so Triton can read the source back."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from codegen_triton.runtime.cache import ensure_file, source_hash

__all__ = ["interpreter_env", "load_kernel_module"]


@contextlib.contextmanager
def interpreter_env(enabled: bool) -> Iterator[None]:
    """While active (and `enabled`), `TRITON_INTERPRET=1`: Triton reads it when decorating and calling kernels."""
    previous = os.environ.get("TRITON_INTERPRET")
    if enabled:
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if enabled:
            if previous is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = previous


def load_kernel_module(source: str, name: str, cache_dir: Path, *, interpret: bool = False) -> ModuleType:
    """Write `source` under `cache_dir/triton/kernels/` (named by its hash) and import it.

    Triton's `@triton.jit` reads a function's source with `inspect`, which needs a real file, so the
    source is never `exec`-ed from a string. The same source always maps to the same file.

    Args:
        source: the Python module text holding one `@triton.jit` kernel.
        name: the kernel's name, used in the file name to make tracebacks readable.
        cache_dir: the root of Kiln's cache.
        interpret: decorate the kernel for Triton's interpreter (`TRITON_INTERPRET=1` is set while the
            module executes, which is when `@triton.jit` decides).

    Returns:
        The imported module.
    """
    digest = source_hash(source)
    # Compared byte for byte and rewritten when different; under a private folder when the
    # cache cannot be written (see runtime/cache.py).
    path = ensure_file(cache_dir, Path("triton", "kernels", digest[:2], f"{name}_{digest[:20]}.py"), source)
    module_name = f"kiln_triton_{name}_{digest[:20]}"
    cached = sys.modules.get(module_name)
    if cached is not None:
        return cached
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load generated kernel {name} from {path}")
    module = importlib.util.module_from_spec(spec)
    with interpreter_env(interpret):
        spec.loader.exec_module(module)
    sys.modules[module_name] = module
    return module
