"""The runtime header, precompiled once per toolchain and cache folder.

Parsing ``kiln_cpu.h`` (``<cmath>``, ``<omp.h>``, the vector types and their operators) is most of
what the compiler spends on a small kernel library: about 0.35 s of a 0.46 s build with g++ -O3.
A precompiled header (``kiln_cpu.h.gch``) built with the very flags the libraries are built with
cuts that to about 0.1 s, for every later library of every process sharing the cache folder.

Layout: ``<cache_dir>/pch/<fingerprint[:24]>/`` holds copies of the runtime headers and
``kiln_cpu.h.gch``. The folder is built in the background, beside the first libraries, under a
temporary name and renamed into place, so a reader sees either nothing or a complete folder. Its
``-I`` goes before the runtime folder's: the compiler then finds ``kiln_cpu.h`` there and uses the ``.gch`` beside it when it is valid for
the command, else parses the copy (the same text: the fingerprint covers the headers). A
precompiled header never changes the machine code, so it is not part of the cache key. Any
failure (no space, a compiler that cannot precompile) only costs the speedup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

from codegen_cpp.compile.toolchain import RUNTIME_DIR, Toolchain, raise_if_interrupted

__all__ = ["HEADER", "precompiled_header_dir"]

HEADER = "kiln_cpu.h"
_READY = "ready"


def _pch_flags(toolchain: Toolchain) -> list[str]:
    """The library flags, minus what only linking needs (a header is compiled, not linked)."""
    return [f for f in toolchain.flags if f not in ("-shared", "-undefined", "dynamic_lookup")]


def _build(toolchain: Toolchain, target: Path) -> bool:
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        staging.mkdir(parents=True)
        for header in RUNTIME_DIR.glob("*.h"):
            shutil.copyfile(header, staging / header.name)
        command = [
            toolchain.compiler,
            *_pch_flags(toolchain),
            "-x",
            "c++-header",
            str(staging / HEADER),
            "-o",
            str(staging / f"{HEADER}.gch"),
        ]
        done = subprocess.run(command, capture_output=True, timeout=300)
        raise_if_interrupted(done.returncode)
        if done.returncode != 0:
            return False
        (staging / _READY).write_bytes(b"")
        try:
            os.rename(staging, target)
        except OSError:
            pass  # another process won the race: its folder is as good as ours
        return (target / _READY).exists()
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _ready(target: Path) -> bool:
    return (target / _READY).exists() and (target / f"{HEADER}.gch").exists()


class _Builds:
    """The background builds this process started, one per target folder.

    A build runs beside the first libraries (they compile from the plain header meanwhile), so
    the first graph of a fresh cache waits for nothing. Its thread is not a daemon: a process that
    ends during the build waits for it (about a second of g++), rather than leaving a half-built
    folder behind.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._threads: dict[Path, threading.Thread] = {}

    def start(self, toolchain: Toolchain, target: Path) -> threading.Thread:
        with self._lock:
            thread = self._threads.get(target)
            if thread is None:
                thread = threading.Thread(
                    target=_build, args=(toolchain, target), name="kiln-precompile-header", daemon=False
                )
                self._threads[target] = thread
                thread.start()
            return thread


# Process-wide, as the compiler processes it tracks are.
_BUILDS = _Builds()


def precompiled_header_dir(toolchain: Toolchain, cache_root: Path, *, wait: bool = False) -> Path | None:
    """The folder holding the precompiled runtime header for ``toolchain``, or None while it is not
    built: the first call starts its build in the background (``wait=True``: and waits for it).

    None also when it cannot be built: libraries are then compiled from the plain header.
    """
    target = cache_root / "pch" / toolchain.fingerprint()[:24]
    if _ready(target):
        return target
    thread = _BUILDS.start(toolchain, target)
    if wait:
        thread.join()
    return target if _ready(target) else None
