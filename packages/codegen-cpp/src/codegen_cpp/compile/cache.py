"""The on-disk cache of compiled kernel libraries.

An entry is a folder ``<cache_dir>/<key[:2]>/<key>/`` holding ``kernels.cpp`` (the source, for
error messages and debugging), ``kernels.so`` and ``kernels.so.sha256``: the entry's own key and
the library's sha256. The key hashes the source with the toolchain's fingerprint (compiler,
version, flags, CPU features, the runtime headers).

Every file is written to a unique temporary name and renamed into place, so concurrent processes
never see half-written files. An entry is trusted only when its record names its own key and
its library matches the recorded digest: a truncated or corrupt library, a damaged record, or the
files of another key's entry (copied or swapped folders) count as missing and are rebuilt, with a
warning once per process. A cache folder that cannot be written (read-only, a file in its place)
is replaced by a private temporary folder for the rest of the process, also with one warning. A
cache fault never reaches the user as an error.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CacheEntry", "KernelCache", "atomic_write", "install_library", "private_cache_root", "warn_once"]

_RECORD_HEADER = b"kiln-cpp-cache 1"

# Cache faults already reported in this process (one warning per kind: a damaged cache would
# otherwise warn once per graph). Process-wide on purpose, like Python's own warning registry.
_REPORTED: set[str] = set()


def warn_once(kind: str, message: str) -> None:
    """Emit ``message`` as a RuntimeWarning the first time a fault of ``kind`` happens in this process."""
    if kind in _REPORTED:
        return
    _REPORTED.add(kind)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a unique temporary file and a rename."""
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def file_digest(path: Path) -> str:
    """The sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(key: str, digest: str) -> bytes:
    """The content of an entry's ``kernels.so.sha256``: its key and its library's digest."""
    return b"\n".join([_RECORD_HEADER, f"key {key}".encode(), f"sha256 {digest}".encode(), b""])


@dataclass(frozen=True)
class CacheEntry:
    """The paths of one cache entry."""

    key: str
    folder: Path

    @property
    def source(self) -> Path:
        """The kernel library's C++ source."""
        return self.folder / "kernels.cpp"

    def part(self, position: int) -> Path:
        """The source of part ``position`` of a library compiled in several parts."""
        return self.folder / f"kernels_part{position}.cpp"

    @property
    def library(self) -> Path:
        """The compiled shared library."""
        return self.folder / "kernels.so"

    @property
    def checksum(self) -> Path:
        """The entry's record (its key and the library's sha256), written after the library."""
        return self.folder / "kernels.so.sha256"

    def fault(self) -> str | None:
        """Why this entry cannot be used although it exists, or None (valid, or simply absent).

        An entry with no record yet is absent, not damaged: another process may be between
        renaming its library into place and writing the record.
        """
        try:
            raw = self.checksum.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            return f"its record cannot be read ({error})"
        lines = raw.split(b"\n")
        if len(lines) < 3 or lines[0] != _RECORD_HEADER:
            return "its record is damaged"
        if lines[1] != f"key {self.key}".encode():
            return "it holds another key's library"
        try:
            digest = file_digest(self.library)
        except OSError as error:
            return f"its library cannot be read ({error})"
        if lines[2] != f"sha256 {digest}".encode():
            return "its library does not match its checksum (truncated or corrupt)"
        return None

    def is_valid(self) -> bool:
        """Whether the library exists, belongs to this key and matches its checksum."""
        return self.checksum.exists() and self.fault() is None

    def invalidate(self) -> None:
        """Forget this entry (its record goes first, so readers never trust a half-removed entry)."""
        for path in (self.checksum, self.library):
            try:
                path.unlink()
            except OSError:
                pass


@functools.cache
def private_cache_root() -> Path:
    """A temporary folder of this process's own, used when the configured cache cannot be written.

    Removed when the process exits (mapped libraries stay valid after their files are unlinked).
    """
    root = Path(tempfile.mkdtemp(prefix="kiln-cpp-cache-"))
    atexit.register(shutil.rmtree, root, True)
    return root


class KernelCache:
    """Compiled libraries under ``root``, keyed by source and toolchain fingerprint."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, source: str, fingerprint: str) -> CacheEntry:
        """The entry for ``source`` built by the toolchain with ``fingerprint`` (it may not exist yet)."""
        key = hashlib.sha256(f"{fingerprint}\0{source}".encode()).hexdigest()
        return CacheEntry(key=key, folder=self.root / key[:2] / key)

    def lookup(self, entry: CacheEntry) -> bool:
        """Whether ``entry`` is ready to load; a damaged one is reported (once) and left to rebuild."""
        fault = entry.fault()
        if fault is not None:
            warn_once(
                "damaged-entry",
                f"Kiln's C++ kernel cache entry {entry.folder} is unusable: {fault}. It is rebuilt "
                "(this warning is shown once per process; remove the cache folder if it keeps happening).",
            )
            return False
        return entry.checksum.exists()

    def prepare(self, entry: CacheEntry, parts: Sequence[str]) -> list[Path]:
        """Create the entry's folder and write its source (``kernels.cpp``, or one file per part).

        Raises:
            OSError: the folder cannot be created or written (the caller switches to a private cache).
        """
        entry.folder.mkdir(parents=True, exist_ok=True)
        paths = [entry.source] if len(parts) == 1 else [entry.part(i) for i in range(len(parts))]
        for path, text in zip(paths, parts):
            # Written every time (a rename of a fresh file): this also proves the folder writable
            # before the compiler runs, and replaces a source file damaged on disk.
            atomic_write(path, text.encode())
        return paths

    def temporary_library(self, entry: CacheEntry, name: str = "kernels.so") -> Path:
        """A unique path in the entry's folder for the compiler to write to."""
        return entry.folder / f"{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def commit(self, entry: CacheEntry, built: Path) -> None:
        """Move a freshly built library into place, then record the entry's key and its checksum."""
        digest = file_digest(built)
        os.replace(built, entry.library)
        atomic_write(entry.checksum, _record(entry.key, digest))

    def private(self, error: OSError) -> KernelCache:
        """The process's private cache, after warning (once) that this one cannot be written."""
        fallback = private_cache_root()
        warn_once(
            "unusable-root",
            f"Kiln's C++ kernel cache folder {self.root} cannot be used ({error}); kernels are built "
            f"in the temporary folder {fallback} for this process instead. Make the folder writable "
            "or point KILN_CACHE_DIR at one that is (this warning is shown once per process).",
        )
        return KernelCache(fallback)


def install_library(cache: KernelCache, entry: CacheEntry, parts: Sequence[str], library: bytes) -> bool:
    """Put a library built elsewhere (a saved graph's bytes) into ``entry``, as a build would.

    Written like a fresh build (temporary name, rename, then the record with its checksum), so the
    usual checks apply when it is looked up. Returns False (nothing installed) when the folder
    cannot be written: the caller then builds as usual, in a private folder.
    """
    try:
        cache.prepare(entry, parts)
        staged = cache.temporary_library(entry)
        staged.write_bytes(library)
        cache.commit(entry, staged)
    except OSError:
        return False
    return True
