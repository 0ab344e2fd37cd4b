"""The on-disk cache of compiled kernel libraries.

An entry is a folder ``<cache_dir>/<key[:2]>/<key>/`` holding ``kernels.cpp`` (the source, for
error messages and debugging), ``kernels.so`` and ``kernels.so.sha256`` (its checksum). The key
hashes the source with the toolchain's fingerprint (compiler, version, flags, CPU features, the
runtime headers). Files are written to a temporary name and renamed into place, so concurrent
processes never see half-written files; an entry whose library does not match its checksum (a
crash mid-write, a truncated copy, disk corruption) counts as missing and is rebuilt.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CacheEntry", "KernelCache", "atomic_write"]


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
        """The library's sha256, written after the library."""
        return self.folder / "kernels.so.sha256"

    def is_valid(self) -> bool:
        """Whether the library exists and matches its checksum."""
        try:
            return self.checksum.read_text().strip() == file_digest(self.library)
        except OSError:
            return False

    def invalidate(self) -> None:
        """Forget this entry (its checksum goes first, so readers never trust a half-removed entry)."""
        for path in (self.checksum, self.library):
            try:
                path.unlink()
            except OSError:
                pass


class KernelCache:
    """Compiled libraries under ``root``, keyed by source and toolchain fingerprint."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def entry(self, source: str, fingerprint: str) -> CacheEntry:
        """The entry for ``source`` built by the toolchain with ``fingerprint`` (it may not exist yet)."""
        key = hashlib.sha256(f"{fingerprint}\0{source}".encode()).hexdigest()
        return CacheEntry(key=key, folder=self.root / key[:2] / key)

    def prepare(self, entry: CacheEntry, parts: Sequence[str]) -> list[Path]:
        """Create the entry's folder and write its source (``kernels.cpp``, or one file per part)."""
        entry.folder.mkdir(parents=True, exist_ok=True)
        paths = [entry.source] if len(parts) == 1 else [entry.part(i) for i in range(len(parts))]
        for path, text in zip(paths, parts):
            if not path.exists() or path.read_text() != text:
                atomic_write(path, text.encode())
        return paths

    def temporary_library(self, entry: CacheEntry, name: str = "kernels.so") -> Path:
        """A unique path in the entry's folder for the compiler to write to."""
        return entry.folder / f"{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"

    def commit(self, entry: CacheEntry, built: Path) -> None:
        """Move a freshly built library into place, then record its checksum."""
        digest = file_digest(built)
        os.replace(built, entry.library)
        atomic_write(entry.checksum, digest.encode())
