"""Where graph-cache entries live: ``<cache_dir>/graphs/<key[:2]>/<key>.kgc``, plus this process's memory.

Writes go to a unique temporary file in the entry's folder, then an atomic rename: concurrent
processes never see half an entry, and the last writer of a key wins with an entry as good as the
others'. Reads check every entry (`codec.decode_entry`); a damaged one is a miss, reported once.
A cache folder that is missing is created; one that cannot be created, read or written (a file in
its place, read-only, no permission) is replaced by a private temporary folder for the rest of the
process, reported once. No fault of the cache ever fails a compilation or changes a result: the
graph is compiled again.

Entries this process wrote, read or was given (`load_cache_artifacts`) are also kept in memory, in
their encoded form, for `save_cache_artifacts` and for a folder that cannot hold them.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path

from frontend.graph_cache.codec import CorruptEntry, decode_entry

__all__ = ["GraphStore", "private_root", "warn_once"]

ENTRY_SUFFIX = ".kgc"

# Faults already reported in this process: one warning per kind (a damaged cache would otherwise
# warn once per graph). Process-wide on purpose, like Python's own warning registry.
_REPORTED: set[str] = set()


def warn_once(kind: str, message: str) -> None:
    """Emit `message` as a RuntimeWarning the first time a fault of `kind` happens in this process."""
    if kind in _REPORTED:
        return
    _REPORTED.add(kind)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


@functools.cache
def private_root() -> Path:
    """A temporary folder of this process's own, used when the configured cache cannot be used."""
    root = Path(tempfile.mkdtemp(prefix="kiln-graph-cache-"))
    atexit.register(shutil.rmtree, root, True)
    return root


class GraphStore:
    """The entries under one cache folder (see the module docstring)."""

    def __init__(self, cache_dir: Path) -> None:
        self.requested = cache_dir / "graphs"
        self.root = self.requested
        self.memory: dict[str, bytes] = {}

    def path(self, key: str) -> Path:
        """Where the entry of `key` is kept."""
        return self.root / key[:2] / f"{key}{ENTRY_SUFFIX}"

    def _use_private(self, error: OSError, doing: str) -> None:
        if self.root != self.requested:
            return
        self.root = private_root()
        warn_once(
            "graph-cache-root",
            f"Kiln's graph cache folder {self.requested} cannot be used ({doing}: {error}); graphs are compiled "
            f"again and cached in the temporary folder {self.root} for this process instead. Make the folder "
            "readable and writable, or point KILN_CACHE_DIR at one that is (shown once per process).",
        )

    def read(self, key: str) -> object | None:
        """The checked entry of `key`, or None (absent, damaged or unreadable: reported once)."""
        data = self.memory.get(key)
        if data is None:
            path = self.path(key)
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                return None
            except OSError as error:
                if isinstance(error, (NotADirectoryError, PermissionError)) or path.parent.exists():
                    self._use_private(error, "reading an entry")
                return None
        try:
            entry = decode_entry(key, data)
        except CorruptEntry as reason:
            self.memory.pop(key, None)
            warn_once(
                "graph-cache-entry",
                f"Kiln's graph cache entry {self.path(key)} is unusable: {reason}. The graph is compiled again "
                "and the entry rewritten (shown once per process; remove the cache folder if it keeps happening).",
            )
            return None
        self.memory[key] = data
        return entry

    def write(self, key: str, data: bytes) -> None:
        """Store the encoded entry `data` under `key` (atomically; in memory too)."""
        self.memory[key] = data
        for _ in range(2):  # the configured folder, then (after a fault) the private one
            path = self.path(key)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                temporary = path.with_name(f"{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
                try:
                    temporary.write_bytes(data)
                    os.replace(temporary, path)
                finally:
                    if temporary.exists():
                        temporary.unlink()
                return
            except OSError as error:
                if self.root != self.requested:
                    return  # the private folder failed too: the entry stays in memory
                self._use_private(error, "writing an entry")

    def forget(self, key: str) -> None:
        """Remove the entry of `key` (a graph that turned out not to run compiled)."""
        self.memory.pop(key, None)
        try:
            self.path(key).unlink()
        except OSError:
            pass
