"""An index of compiled kernel binaries: a warm process loads a kernel without Triton's source hashing.

`triton.compile` finds a kernel compiled before in Triton's disk cache under a key it computes from the
kernel's source and everything the source calls (parsing them), a hash of Triton's own files (read once
per process, about 0.4 s) and the compile options. On a warm start that was most of the time spent
loading a saved graph: about 12 ms per kernel, and the kernel's module had to be executed first, so that
`@triton.jit` read its source back with `inspect`.

When a launch compiles a variant, the index records Triton's key for it in a small file named by Kiln's
own key: the kernel source, the variant, the compile options, the GPU, Triton's version and installed
files (their sizes and modification times) and the environment variables Triton's key includes. A later
process with the same key reads the record and loads the binary straight from Triton's cache group,
without executing the kernel's module. A record that is unreadable, names another key, or points to a
cache group that is gone or broken is ignored: the variant is then compiled (or found) by Triton as
before, and recorded again.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codegen_triton.runtime.cache import atomic_write_text, source_hash
from codegen_triton.runtime.fast_launch import COMPILE_OPTIONS, Variant, kernel_source

__all__ = ["BinaryIndex", "KernelNames", "kernel_parameters"]

_FORMAT = 1
_HASH = re.compile(r"[0-9a-f]{64}")


class KernelNames:
    """What Triton's launcher reads of a `@triton.jit` function: its name and parameter names."""

    def __init__(self, name: str, arg_names: Sequence[str]) -> None:
        self.__name__ = name
        self.arg_names = list(arg_names)


def kernel_parameters(source: str, name: str) -> tuple[str, ...]:
    """The parameter names of the kernel `name` in a generated module's `source` (read from its `def`
    line, which codegen writes on one line), without executing the module."""
    start = source.index(f"def {name}(") + len(f"def {name}(")
    end = source.index("):", start)
    return tuple(part.split(":")[0].strip() for part in source[start:end].split(",") if part.strip())


@functools.cache
def _triton_install() -> str:
    """Triton's version and a stamp of its installed files (a reinstall of the same version changes it)."""
    import triton
    import triton.backends.nvidia.compiler as nvidia_compiler
    import triton.compiler.compiler as compiler

    stamps = []
    for module in (triton, compiler, nvidia_compiler):
        path = module.__file__ or ""
        try:
            stat = os.stat(path)
            stamps.append(f"{path}:{stat.st_size}:{stat.st_mtime_ns}")
        except OSError:
            stamps.append(f"{path}:?")
    return "|".join([triton.__version__, *stamps])


def _triton_env() -> str:
    """The environment variables Triton's own cache key includes (as Triton reads them now)."""
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return repr(sorted(get_cache_invalidating_env_vars().items()))


class BinaryIndex:
    """The binaries of one kernel's variants compiled on one kind of GPU, under `cache_dir/triton/compiled/`.

    Args:
        cache_dir: Kiln's cache root.
        source: the kernel module's text.
        name: the `@triton.jit` function's name in it.
        device_name: the GPU's name (as `torch.cuda.get_device_name` gives it).
    """

    def __init__(self, cache_dir: Path, source: str, name: str, device_name: str) -> None:
        self.cache_dir = cache_dir
        self.source = source
        self.name = name
        self.device_name = device_name

    def key(self, variant: Variant) -> str:
        """Kiln's key of a variant's binary."""
        options = repr(sorted(COMPILE_OPTIONS.items()))
        return source_hash(self.source, repr(variant), options, self.device_name, _triton_install(), _triton_env())

    def _path(self, variant: Variant) -> Path:
        return self.cache_dir / "triton" / "compiled" / self.key(variant)

    def contains(self, variant: Variant) -> bool:
        """Whether a launch compiled this variant before (its binary is then in Triton's disk cache)."""
        return self._path(variant).exists()

    def record(self, variant: Variant, compiled: Any) -> None:
        """Remember where Triton keeps `compiled` (a `CompiledKernel` of this variant); best effort."""
        path = self._path(variant)
        text = json.dumps({"format": _FORMAT, "key": self.key(variant), "triton_hash": str(compiled.hash)})
        try:
            if not path.exists() or path.read_text() != text:
                atomic_write_text(path, text)
        except OSError:
            pass  # the next process only compiles (or finds) it through Triton again

    def load(self, variant: Variant, parameters: Sequence[str]) -> Any | None:
        """The variant's `CompiledKernel` from Triton's disk cache, or None where no intact record and
        cache group exist. `parameters`: the kernel's parameter names (runtime arguments, then blocks)."""
        path = self._path(variant)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("format") != _FORMAT or record.get("key") != path.name:
            return None
        triton_hash = record.get("triton_hash")
        if not isinstance(triton_hash, str) or _HASH.fullmatch(triton_hash) is None:
            return None
        try:
            from triton.compiler.compiler import CompiledKernel
            from triton.runtime.cache import get_cache_manager

            group = get_cache_manager(triton_hash).get_group(f"{self.name[:150]}.json")
            if not group:
                return None
            return CompiledKernel(kernel_source(KernelNames(self.name, parameters), variant), group, triton_hash)
        except Exception:
            return None
