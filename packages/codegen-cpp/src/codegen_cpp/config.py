"""`CppConfig`: every knob of the C++ backend, and the one place environment variables are read."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inductor_ir.options import options_hash, parse_dataclass_options

__all__ = ["CppConfig", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$KILN_CACHE_DIR/cpp`` if set, else ``$XDG_CACHE_HOME/kiln/cpp`` (``~/.cache/kiln/cpp``)."""
    root = os.environ.get("KILN_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "cpp"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kiln" / "cpp"


@dataclass(frozen=True)
class CppConfig:
    """Configuration of :class:`codegen_cpp.CppBackend`.

    compiler: the C++ compiler to run (a name on PATH or a path); None: ``$CXX``, then ``g++``,
        ``clang++``, ``c++``.
    march_native: compile with ``-march=native`` when the compiler accepts it (the cache key then
        includes this machine's CPU features).
    openmp: compile with OpenMP (``-fopenmp``) when the compiler supports it.
    extra_flags: appended to every compile command.
    cache_dir: where compiled libraries are kept; None: :func:`default_cache_dir` at use time.
    fallback_to_eager: with no C++ compiler, run the graph's kernels with the reference
        interpreter instead of raising :class:`codegen_cpp.CppCompilerNotFoundError`.
    fallback_random: random ops (``rand``, ``randn``, dropout, ``bernoulli``, ...) run as ATen
        calls drawing from torch's generator, so results are bit-identical to eager PyTorch under
        the same seed; False: they are generated in the kernels from one seed drawn per call
        (faster, equal to eager in distribution only).
    vectorize: generate SIMD vector loops (with scalar tails) where a kernel allows.
    merge_dims: run adjacent dims as one loop where every index allows (longer vector loops).
    parallel_threshold: the least number of elements each thread gets (as ATen's grain size): a
        kernel runs on threads from twice this many elements, on at most ``elements / threshold``
        threads (``#pragma omp parallel for num_threads(...) if(...)``): no thread start-up on
        small kernels.
    num_threads: OpenMP threads per kernel; None: ``torch.get_num_threads()`` at each call.
    compile_workers: compiler processes run at once; None: the number of CPUs.
    kernels_per_part: a graph with at least twice this many kernels is compiled as several
        translation units in parallel (up to ``compile_workers``) and linked into its one library.
    runtime_checks: kernels check indirect indices (``x[i]``, gather, embedding, scatter, ...) and
        integer divisors and raise what eager raises (``IndexError``, ``RuntimeError``) instead of
        reading out of bounds or dying with SIGFPE. False: no checks (a little faster; an invalid
        index then reads or writes arbitrary memory).
    precompiled_header: compile the runtime header once per toolchain and cache folder (in
        ``<cache_dir>/pch/``) and reuse it for every library, which roughly halves the compile time
        of small graphs. It never changes the generated machine code.
    """

    compiler: str | None = None
    march_native: bool = True
    openmp: bool = True
    extra_flags: tuple[str, ...] = ()
    cache_dir: Path | None = None
    fallback_to_eager: bool = False
    fallback_random: bool = False
    vectorize: bool = True
    merge_dims: bool = True
    parallel_threshold: int = 32768
    num_threads: int | None = None
    compile_workers: int | None = None
    kernels_per_part: int = 8
    runtime_checks: bool = True
    precompiled_header: bool = True

    @classmethod
    def parse_options(cls, options: Mapping[str, Any]) -> CppConfig:
        """A config from a dictionary of its fields and inductor_ir's common backend options.

        ``cache_root`` (Kiln's cache folder) puts the libraries in its ``cpp`` subfolder unless
        ``cache_dir`` is given; ``max_autotune`` changes nothing here (no launch configurations to
        tune). The compiler still comes from ``$CXX`` unless ``compiler`` is given. An unknown key
        raises ``inductor_ir.OptionError`` listing the valid ones.
        """
        own = dict(options)
        own.pop("max_autotune", None)
        root = own.pop("cache_root", None)
        if root is not None and "cache_dir" not in own:
            own["cache_dir"] = Path(root) / "cpp"
        return parse_dataclass_options(cls, own, owner="C++ backend ('cpu.*')", base=cls.from_env())

    def hash(self) -> str:
        """The identity of the code this config generates: every field but where files go and how
        many compiler processes run."""
        return options_hash(self, exclude=("cache_dir", "compile_workers"))

    @classmethod
    def from_env(cls, **overrides: Any) -> CppConfig:
        """A config whose compiler comes from ``$CXX`` (when set), with ``overrides`` applied."""
        values: dict[str, Any] = {}
        cxx = os.environ.get("CXX")
        if cxx:
            values["compiler"] = cxx
        values.update(overrides)
        return cls(**values)

    def resolved_cache_dir(self) -> Path:
        """The cache directory this config uses."""
        return self.cache_dir if self.cache_dir is not None else default_cache_dir()

    def replace(self, **changes: Any) -> CppConfig:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)
