"""Files in the cache folder: content-addressed names, atomic writes, and cache faults survived.

A cache fault never reaches the user as an error or a wrong value. A file whose bytes cannot be
decoded, or that belongs to another key (tuning records store their own key and are checked
against it), reads as missing; a cache folder that cannot be written (read-only, a file where a
folder should be) is replaced by a private temporary folder for the rest of the process. Each
kind of fault is reported once per process with a RuntimeWarning.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

__all__ = [
    "atomic_write_text",
    "ensure_file",
    "private_cache_root",
    "read_json",
    "read_keyed_json",
    "source_hash",
    "warn_once",
    "write_keyed_json",
]

# Cache faults already reported in this process (one warning per kind, not one per kernel).
# Process-wide on purpose, like Python's own warning registry.
_REPORTED: set[str] = set()


def warn_once(kind: str, message: str) -> None:
    """Emit ``message`` as a RuntimeWarning the first time a fault of ``kind`` happens in this process."""
    if kind in _REPORTED:
        return
    _REPORTED.add(kind)
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def source_hash(*parts: str) -> str:
    """A stable hex digest of some strings (kernel source, device name, versions...)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` so that readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode())
        os.replace(tmp, path)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise


def with_suppressed_unlink(path: str) -> None:
    """Remove a leftover temporary file, ignoring one that is already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


@functools.cache
def private_cache_root() -> Path:
    """A temporary folder of this process's own, used when the configured cache cannot be written."""
    root = Path(tempfile.mkdtemp(prefix="kiln-triton-cache-"))
    atexit.register(shutil.rmtree, root, True)
    return root


def ensure_file(root: Path, relative: Path, text: str) -> Path:
    """The path of a file under `root` holding exactly `text`, written (atomically) if it does not.

    An existing file is compared byte for byte, so a damaged or foreign one is replaced. When
    `root` cannot be written, the file goes under `private_cache_root()` instead (warned once).
    """
    data = text.encode()
    for folder in (root, None):
        path = (folder if folder is not None else private_cache_root()) / relative
        try:
            if path.read_bytes() == data:
                return path
        except OSError:
            pass
        try:
            atomic_write_text(path, text)
            return path
        except OSError as error:
            if folder is None:
                raise
            warn_once(
                "unusable-root",
                f"Kiln's Triton cache folder {root} cannot be used ({error}); files go to the temporary "
                f"folder {private_cache_root()} for this process instead. Make the folder writable or point "
                "KILN_CACHE_DIR at one that is (this warning is shown once per process).",
            )
    raise AssertionError("unreachable")


def read_json(path: Path) -> Any | None:
    """The JSON content of `path`, or None when it is missing or unreadable (a corrupt cache entry)."""
    try:
        return json.loads(path.read_bytes().decode())
    except (OSError, ValueError):
        return None


def read_keyed_json(path: Path, key: str) -> Any | None:
    """The value `write_keyed_json` stored at `path` under `key`; None when missing, damaged or another key's."""
    data = read_json(path)
    if isinstance(data, dict) and data.get("key") == key and "value" in data:
        return data["value"]
    if path.exists():
        warn_once(
            "damaged-entry",
            f"Kiln's Triton cache file {path} is damaged or belongs to another key; it is ignored "
            "and rewritten (this warning is shown once per process).",
        )
    return None


def write_keyed_json(path: Path, key: str, value: Any) -> None:
    """Record `value` at `path` with its `key`; a cache that cannot be written only loses the record."""
    try:
        atomic_write_text(path, json.dumps({"key": key, "value": value}))
    except OSError as error:
        warn_once(
            "unwritable-record",
            f"Kiln's Triton cache could not record {path.name} ({error}); results are kept in memory for "
            "this process only (this warning is shown once per process).",
        )
