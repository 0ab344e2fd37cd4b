"""Compiling kernel libraries: cache lookup, the compiler run, parallel builds and their timing."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from codegen_cpp.compile.cache import CacheEntry, KernelCache, warn_once
from codegen_cpp.compile.pch import precompiled_header_dir
from codegen_cpp.compile.toolchain import Toolchain, raise_if_interrupted
from codegen_cpp.errors import CppCompileError

__all__ = ["PART_SEPARATOR", "BuildResult", "CompileStats", "build_libraries"]

PART_SEPARATOR = "\n// ---- next translation unit of this library ----\n"


@dataclass
class CompileStats:
    """What compiling cost, accumulated over a backend's lifetime.

    libraries: libraries asked for; cache_hits: of those, found ready on disk; compiler_seconds:
    summed wall time of compiler runs (they may overlap); wall_seconds: time spent in
    :func:`build_libraries` (what the user waited for).
    """

    libraries: int = 0
    cache_hits: int = 0
    compiler_seconds: float = 0.0
    wall_seconds: float = 0.0
    per_library: list[tuple[str, float, bool]] = field(default_factory=list)

    def summary(self) -> str:
        """One line for logs: ``3 C++ libraries (1 cached) in 1.52 s``."""
        return (
            f"{self.libraries} C++ libraries ({self.cache_hits} cached) in {self.wall_seconds:.2f} s "
            f"(compiler {self.compiler_seconds:.2f} s)"
        )


@dataclass(frozen=True)
class BuildResult:
    """A compiled library: its cache entry and whether it came from the cache."""

    entry: CacheEntry
    cached: bool
    seconds: float


def _run(command: list[str], source: Path) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    raise_if_interrupted(done.returncode)
    if done.returncode != 0:
        raise CppCompileError(source, command, done.stderr or done.stdout)


def _compile_with_pch(
    cache: KernelCache, entry: CacheEntry, parts: Sequence[str], toolchain: Toolchain, workers: int
) -> None:
    """Compile with the precompiled runtime header when there is one; without it if that fails."""
    folder = precompiled_header_dir(toolchain, cache.root)
    if folder is None:
        _compile_into(cache, entry, parts, toolchain, workers)
        return
    try:
        _compile_into(cache, entry, parts, toolchain.searching_first(folder), workers)
    except CppCompileError:
        # A damaged precompiled header must never fail a graph: the plain header decides.
        _compile_into(cache, entry, parts, toolchain, workers)
        warn_once(
            "precompiled-header",
            f"Kiln's precompiled C++ runtime header in {folder} did not work; kernels are compiled "
            "from the plain header (remove that folder to rebuild it; shown once per process).",
        )


def _build_one(
    parts: Sequence[str], toolchain: Toolchain, cache: KernelCache, force: bool, workers: int, precompile: bool
) -> BuildResult:
    start = time.perf_counter()
    source = PART_SEPARATOR.join(parts)
    entry = cache.entry(source, toolchain.fingerprint())
    if not force and cache.lookup(entry):
        return BuildResult(entry, cached=True, seconds=time.perf_counter() - start)
    compile_into = _compile_with_pch if precompile else _compile_into
    try:
        compile_into(cache, entry, parts, toolchain, workers)
    except OSError as error:
        # The cache folder cannot be written (read-only, a file where a folder should be, full):
        # build in the process's private folder instead of failing the graph.
        cache = cache.private(error)
        entry = cache.entry(source, toolchain.fingerprint())
        if force or not cache.lookup(entry):
            compile_into(cache, entry, parts, toolchain, workers)
    return BuildResult(entry, cached=False, seconds=time.perf_counter() - start)


def _compile_into(cache: KernelCache, entry: CacheEntry, parts: Sequence[str], toolchain: Toolchain, workers: int) -> None:
    """Compile ``parts`` into ``entry``'s library (in a temporary file renamed into place)."""
    paths = cache.prepare(entry, parts)
    output = cache.temporary_library(entry)
    objects = [cache.temporary_library(entry, f"{path.stem}.o") for path in paths]
    try:
        if len(paths) == 1:
            _run(toolchain.command(paths[0], output), paths[0])
        else:
            # Parts compile in parallel, then link into the graph's one library.
            with ThreadPoolExecutor(max_workers=max(1, min(workers, len(paths)))) as pool:
                list(
                    pool.map(lambda p: _run(toolchain.object_command(p[0], p[1]), p[0]), zip(paths, objects))
                )
            _run(toolchain.link_command(objects, output), paths[0])
        cache.commit(entry, output)
    finally:
        for leftover in (output, *objects):
            try:
                leftover.unlink()
            except OSError:
                pass


def build_libraries(
    sources: Sequence[Sequence[str]],
    toolchain: Toolchain,
    cache: KernelCache,
    stats: CompileStats,
    *,
    workers: int,
    force: bool = False,
    precompile: bool = True,
) -> list[Path]:
    """Build (or find in the cache) one shared library per source, several compilers at once.

    Args:
        sources: one entry per library: its translation units ("parts", compiled in parallel and
            linked together when there are several).
        force: rebuild even where the cache has a valid entry (used after a library failed to load).
        precompile: on a cache miss, compile with the runtime header precompiled (built once per
            toolchain and cache folder; see :mod:`codegen_cpp.compile.pch`).

    Returns:
        The library paths, in the order of ``sources``.

    Raises:
        CppCompileError: the compiler rejected a source (the first failure is raised).
    """
    start = time.perf_counter()
    if len(sources) <= 1 or workers <= 1:
        results = [_build_one(parts, toolchain, cache, force, workers, precompile) for parts in sources]
    else:
        with ThreadPoolExecutor(max_workers=min(workers, len(sources))) as pool:
            results = list(
                pool.map(lambda parts: _build_one(parts, toolchain, cache, force, workers, precompile), sources)
            )
    stats.libraries += len(results)
    stats.cache_hits += sum(1 for r in results if r.cached)
    stats.compiler_seconds += sum(r.seconds for r in results if not r.cached)
    stats.wall_seconds += time.perf_counter() - start
    stats.per_library += [(r.entry.key[:12], r.seconds, r.cached) for r in results]
    return [r.entry.library for r in results]
