"""Finding the system C++ compiler and the flags it accepts, once per process per compiler."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from codegen_cpp.codegen.lanes import VECTOR_FLAGS
from codegen_cpp.compile.cache import atomic_write
from codegen_cpp.config import CppConfig
from codegen_cpp.errors import CppCompilerNotFoundError

__all__ = ["Toolchain", "cpu_features", "find_toolchain", "raise_if_interrupted"]

RUNTIME_DIR = Path(__file__).resolve().parent.parent / "runtime"
# -fwrapv: int32/int64 arithmetic wraps as eager's does; signed overflow is otherwise undefined and
# g++ folds `(x + x) != 0` to `x != 0`, so a sum that wraps to 0 read as true.
# -ffp-contract=off: every op rounds its result as eager's kernels do; g++ (C++ at any -std) fuses
# `a * b - c` into an fma by default, so `x * y - mean` of one element was a rounding error, not 0
# (var's gradient, inf * 0, came out inf where eager gives nan).
BASE_FLAGS = (
    "-std=c++17", "-O3", "-fwrapv", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fPIC", "-shared", "-w",
)  # fmt: skip
# -fno-tree-loop-if-convert: g++ 12 at -O3 with AVX (-march=native) vectorizes a loop whose load
# index is computed (reflect padding's |2 - |x - 1||) and whose value is selected by a condition
# loaded through that index into wrong code: F.pad(scatter(x, ...), mode='reflect') read zeros and
# garbage. If-conversion is what turns such a loop's branches into masked vector loads; Kiln's own
# vector kernels select with explicit vector types and do not need it. Compilers that refuse the
# flag (it is GCC's) build without it.
GCC_WORKAROUND_FLAGS = ("-fno-tree-loop-if-convert",)
_PROBE_SOURCE = """
#include <cmath>
#ifdef _OPENMP
#include <omp.h>
#endif
extern "C" int kiln_probe(int n) {
  int s = 0;
  #pragma omp parallel for reduction(+:s)
  for (int i = 0; i < n; ++i) s += i;
  return s;
}
"""


@dataclass(frozen=True)
class Toolchain:
    """A working compiler and the flags every kernel library is built with.

    compiler: absolute path of the executable; version: the first line of ``--version``;
    flags: everything between the compiler and the source file; openmp: whether ``-fopenmp`` is on.
    header_dirs: folders searched for headers before the runtime folder (the precompiled header's,
    see :mod:`codegen_cpp.compile.pch`); they speed the build up without changing the machine code,
    so they are not part of :meth:`fingerprint`.
    """

    compiler: str
    version: str
    flags: tuple[str, ...]
    openmp: bool
    header_dirs: tuple[str, ...] = ()

    def searching_first(self, folder: Path) -> Toolchain:
        """This toolchain, looking for headers in ``folder`` before anywhere else."""
        return dataclasses.replace(self, header_dirs=(str(folder), *self.header_dirs))

    def _flags(self, link: bool) -> list[str]:
        flags = [f"-I{d}" for d in self.header_dirs]
        if link:
            return [*flags, *self.flags]
        return [*flags, *(f for f in self.flags if f not in ("-shared", "-undefined", "dynamic_lookup"))]

    def fingerprint(self) -> str:
        """What changes the machine code: compiler, version, flags, CPU features, runtime headers."""
        digest = hashlib.sha256()
        for part in (self.compiler, self.version, " ".join(self.flags), cpu_features(), _runtime_digest()):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()

    def command(self, source: Path, output: Path) -> list[str]:
        """The compile command turning ``source`` into the shared library ``output``."""
        return [self.compiler, *self._flags(link=True), str(source), "-o", str(output)]

    def object_command(self, source: Path, output: Path) -> list[str]:
        """The command compiling ``source`` to the object file ``output`` (for a multi-part library)."""
        return [self.compiler, *self._flags(link=False), "-c", str(source), "-o", str(output)]

    def link_command(self, objects: list[Path], output: Path) -> list[str]:
        """The command linking object files into the shared library ``output``."""
        return [self.compiler, *self.flags, *(str(o) for o in objects), "-o", str(output)]


@functools.cache
def cpu_features() -> str:
    """This CPU's model and feature flags (part of the cache key when ``-march=native`` is used)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    wanted = ("model name", "flags", "Features")
    lines = sorted({line.strip() for line in text.splitlines() if line.split(":")[0].strip() in wanted})
    return "\n".join(lines)


@functools.cache
def _runtime_digest() -> str:
    digest = hashlib.sha256()
    for header in sorted(RUNTIME_DIR.glob("*.h")):
        digest.update(header.read_bytes())
    return digest.hexdigest()


def raise_if_interrupted(returncode: int) -> None:
    """Raise KeyboardInterrupt for a compiler that died of SIGINT.

    Ctrl-C in a terminal signals the whole process group, compilers included. Read as "this flag is
    refused" or "this source does not compile", such a death would be remembered (the flag probe
    is cached for the process and on disk: every later graph would run without a compiler) or turn
    the graph eager; it is the user's interrupt, and propagates as one.
    """
    if returncode == -signal.SIGINT:
        raise KeyboardInterrupt


def _candidates(config: CppConfig) -> list[str]:
    if config.compiler:
        return [config.compiler]
    return ["g++", "clang++", "c++"]


def _version_of(compiler: str) -> str | None:
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    raise_if_interrupted(done.returncode)
    if done.returncode != 0 or not done.stdout:
        return None
    return done.stdout.splitlines()[0].strip()


def _accepts(compiler: str, flags: tuple[str, ...]) -> bool:
    with tempfile.TemporaryDirectory(prefix="kiln-probe-") as tmp:
        source = Path(tmp) / "probe.cpp"
        source.write_text(_PROBE_SOURCE)
        command = [compiler, *flags, str(source), "-o", str(Path(tmp) / "probe.so")]
        try:
            done = subprocess.run(command, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return False
        raise_if_interrupted(done.returncode)
        return done.returncode == 0


def _probe_record(cache_dir: Path, compiler: str, version: str, request: tuple[object, ...]) -> Path:
    stat = os.stat(compiler)
    key = hashlib.sha256(
        repr((compiler, version, stat.st_mtime_ns, stat.st_size, request, cpu_features())).encode()
    )
    return cache_dir / "toolchains" / f"{key.hexdigest()[:24]}.json"


@functools.cache
def _probe(
    compiler: str, march_native: bool, openmp: bool, extra: tuple[str, ...], cache_dir: Path
) -> Toolchain | None:
    """The best flags ``compiler`` accepts; remembered on disk so later processes skip the probe."""
    version = _version_of(compiler)
    if version is None:
        return None
    # BASE_FLAGS are part of the key: a record saved under other base flags would keep them.
    request = (march_native, openmp, extra, str(RUNTIME_DIR), BASE_FLAGS, VECTOR_FLAGS, GCC_WORKAROUND_FLAGS)
    record = _probe_record(cache_dir, compiler, version, request)
    try:
        saved = json.loads(record.read_text())
        return Toolchain(
            compiler=compiler, version=version, flags=tuple(saved["flags"]), openmp=bool(saved["openmp"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        pass
    toolchain = _probe_flags(compiler, version, march_native, openmp, extra)
    if toolchain is not None:
        try:
            record.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(
                record, json.dumps({"flags": list(toolchain.flags), "openmp": toolchain.openmp}).encode()
            )
        except OSError:
            pass  # a read-only cache only costs the probe next time
    return toolchain


def _probe_flags(
    compiler: str, version: str, march_native: bool, openmp: bool, extra: tuple[str, ...]
) -> Toolchain | None:
    base = (*BASE_FLAGS, *VECTOR_FLAGS, f"-I{RUNTIME_DIR}", *extra)
    if sys.platform == "darwin":
        base = (*base, "-undefined", "dynamic_lookup")
    # Try the best flags first; drop what this compiler or CPU refuses (-march=native is unsafe
    # under some emulators and unknown to some compilers; Apple clang has no -fopenmp).
    options: list[tuple[tuple[str, ...], bool]] = []
    for workaround in (GCC_WORKAROUND_FLAGS, ()):
        for native in [True, False] if march_native else [False]:
            for omp in [True, False] if openmp else [False]:
                flags = (*base, *workaround, *(("-march=native",) if native else ()), *(("-fopenmp",) if omp else ()))
                options.append((flags, omp))
    for flags, omp in options:
        if _accepts(compiler, flags):
            return Toolchain(compiler=compiler, version=version, flags=flags, openmp=omp)
    return None


def find_toolchain(config: CppConfig) -> Toolchain:
    """The first working compiler of ``config.compiler`` or ``g++``/``clang++``/``c++``, with its flags.

    Raises:
        CppCompilerNotFoundError: none of them runs and builds a shared library.
    """
    tried: list[str] = []
    for name in _candidates(config):
        path = shutil.which(name) or (name if os.path.isfile(name) else None)
        tried.append(name if path is None else path)
        if path is None:
            continue
        toolchain = _probe(
            path, config.march_native, config.openmp, tuple(config.extra_flags), config.resolved_cache_dir()
        )
        if toolchain is not None:
            return toolchain
    raise CppCompilerNotFoundError(tried)
